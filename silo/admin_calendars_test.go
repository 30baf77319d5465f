package silo

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// send sends a request with a body and headers, and decodes the JSON answer.
func send(t *testing.T, method, url, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestAdminCalendars: PUT /v1/calendars/{ns}/{name} puts a calendar on every partition from
// its protobuf JSON, GET reads it and GET /v1/calendars/{ns} lists it; a bad date is 400 naming
// the field, a body naming another calendar 400 on name, a cross-origin PUT 403; DELETE removes
// it, after which GET is 404.
func TestAdminCalendars(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	base := "http://" + s.AdminAddress() + "/v1/calendars/cal-admin"
	body := `{"time_zone": "America/New_York", "excluded_dates": ["2026-07-04"], "excluded_ranges": [{"from": "2026-12-24", "to": "2026-12-26"}], "excluded_crons": ["* * 0-5 * * *"], "description": "US"}`
	if code, out := send(t, http.MethodPut, base+"/us", body, map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Fatalf("cross-origin put: %d %v, want 403", code, out)
	}
	if code, out := send(t, http.MethodPut, base+"/us", body, nil); code != http.StatusOK || out["name"] != "us" {
		t.Fatalf("put: %d %v", code, out)
	}
	code, out := getJSON(t, base+"/us")
	calendar, _ := out["calendar"].(map[string]any)
	if code != http.StatusOK || calendar["time_zone"] != "America/New_York" || calendar["description"] != "US" || out["put_by"] == "" {
		t.Fatalf("get: %d %v", code, out)
	}
	code, out = getJSON(t, base)
	if listed, _ := out["calendars"].([]any); code != http.StatusOK || len(listed) != 1 || out["next_after"] != nil {
		t.Fatalf("list: %d %v", code, out)
	}
	code, out = send(t, http.MethodPut, base+"/bad", `{"excluded_dates": ["2026-13-01"]}`, nil)
	if errBody, _ := out["error"].(map[string]any); code != http.StatusBadRequest || !strings.HasSuffix(errBody["field"].(string), "calendar.excluded_dates[0]") {
		t.Fatalf("a bad date: %d %v", code, out)
	}
	if code, out := send(t, http.MethodPut, base+"/bad", `{"name": "other"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("a body naming another calendar: %d %v", code, out)
	}
	if code, out := send(t, http.MethodDelete, base+"/us", "", nil); code != http.StatusOK || out["deleted"] != true {
		t.Fatalf("delete: %d %v", code, out)
	}
	if code, out := getJSON(t, base+"/us"); code != http.StatusNotFound {
		t.Fatalf("get after the delete: %d %v, want 404", code, out)
	}
}
