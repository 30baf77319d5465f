package ui_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// browserRequiredEnv, set by make test, turns a missing chromium into a failure instead of a
// skip.
const browserRequiredEnv = "ORRERY_UI_BROWSER_REQUIRED"

// elementKey is the W3C WebDriver key of an element reference.
const elementKey = "element-6066-11e4-a52e-4f735466cecf"

// browser is one headless chromium session driven through chromedriver's W3C WebDriver HTTP
// API.
type browser struct {
	t       *testing.T
	base    string // http://127.0.0.1:port/session/id
	timeout time.Duration
}

// startBrowser starts chromedriver on a free loopback port and a headless chromium session;
// t.Cleanup ends the session and stops chromedriver. Without chromium it skips, or fails when
// browserRequiredEnv is set.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	chromium, errChromium := exec.LookPath("chromium")
	driver, errDriver := exec.LookPath("chromedriver")
	if errChromium != nil || errDriver != nil {
		msg := "the UI browser test needs Debian's chromium and chromedriver (apt-get install chromium chromium-driver; make test installs them)"
		if os.Getenv(browserRequiredEnv) != "" {
			t.Fatalf("%s: %v %v", msg, errChromium, errDriver)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var log bytes.Buffer
	cmd := exec.Command(driver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromedriver: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	b := &browser{t: t, base: root, timeout: 30 * time.Second}
	b.poll("chromedriver ready", func() (bool, error) {
		var status struct {
			Ready bool `json:"ready"`
		}
		err := b.call(http.MethodGet, "/status", nil, &status)
		return err == nil && status.Ready, nil
	})
	var session struct {
		SessionID string `json:"sessionId"`
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": chromium,
			"args": []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
				"--window-size=1400,1500", "--user-data-dir=" + t.TempDir()},
		},
	}}}
	if err := b.call(http.MethodPost, "/session", caps, &session); err != nil {
		t.Fatalf("new chromium session: %v\nchromedriver log:\n%s", err, log.String())
	}
	b.base = root + "/session/" + session.SessionID
	t.Cleanup(func() { _ = b.call(http.MethodDelete, "", nil, nil) })
	return b
}

// call sends one WebDriver command and decodes its "value" into out (when not nil).
func (b *browser) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		enc, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(enc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var reply struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return fmt.Errorf("%s %s: %d, undecodable reply: %w", method, path, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, reply.Value)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Value, out)
}

// must fails the test when a WebDriver command fails.
func (b *browser) must(method, path string, in, out any) {
	b.t.Helper()
	if err := b.call(method, path, in, out); err != nil {
		b.t.Fatal(err)
	}
}

// poll calls cond every 100 ms until it is true, failing the test after b.timeout (or at once
// on an error).
func (b *browser) poll(what string, cond func() (bool, error)) {
	b.t.Helper()
	deadline := time.Now().Add(b.timeout)
	for {
		ok, err := cond()
		if err != nil {
			b.t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: not within %v\n%s", what, b.timeout, b.page())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// page describes what the browser shows, for a failure message: its address, the page's
// text and the chromedriver log's tail.
func (b *browser) page() string {
	var url, text string
	_ = b.call(http.MethodGet, "/url", nil, &url)
	_ = b.call(http.MethodPost, "/execute/sync", map[string]any{"script": "return document.body ? document.body.innerText : document.documentElement.outerHTML;", "args": []any{}}, &text)
	return fmt.Sprintf("page %s:\n%s", url, text)
}

// open navigates to url.
func (b *browser) open(url string) {
	b.must(http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// find returns the element matching a CSS selector, or "" when there is none.
func (b *browser) find(selector string) string {
	var els []map[string]string
	b.must(http.MethodPost, "/elements", map[string]string{"using": "css selector", "value": selector}, &els)
	if len(els) == 0 {
		return ""
	}
	return els[0][elementKey]
}

// waitFor polls until an element matches selector and returns it.
func (b *browser) waitFor(selector string) string {
	b.t.Helper()
	var id string
	b.poll("element "+selector, func() (bool, error) {
		id = b.find(selector)
		return id != "", nil
	})
	return id
}

// text is an element's rendered text ("" when it has gone stale).
func (b *browser) text(element string) string {
	var s string
	if err := b.call(http.MethodGet, "/element/"+element+"/text", nil, &s); err != nil {
		return ""
	}
	return s
}

// textOf is the rendered text of the element matching selector ("" when none does).
func (b *browser) textOf(selector string) string {
	if id := b.find(selector); id != "" {
		return b.text(id)
	}
	return ""
}

// typeInto clears an input and types text into it.
func (b *browser) typeInto(selector, text string) {
	b.t.Helper()
	id := b.waitFor(selector)
	b.must(http.MethodPost, "/element/"+id+"/clear", map[string]any{}, nil)
	b.must(http.MethodPost, "/element/"+id+"/value", map[string]string{"text": text}, nil)
}

// click clicks the element matching selector once it is there, again if the page re-rendered
// it between finding and clicking.
func (b *browser) click(selector string) {
	b.t.Helper()
	var last error
	b.poll("click "+selector, func() (bool, error) {
		id := b.find(selector)
		if id == "" {
			return false, nil
		}
		last = b.call(http.MethodPost, "/element/"+id+"/click", map[string]any{}, nil)
		return last == nil, nil
	})
}

// script runs JavaScript in the page and decodes its return value into out (nil: ignored).
func (b *browser) script(js string, out any) {
	b.t.Helper()
	b.must(http.MethodPost, "/execute/sync", map[string]any{"script": js, "args": []any{}}, out)
}

// screenshot writes a PNG of the window to path.
func (b *browser) screenshot(path string) {
	b.t.Helper()
	var encoded string
	b.must(http.MethodGet, "/screenshot", nil, &encoded)
	png, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
