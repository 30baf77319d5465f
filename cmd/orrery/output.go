package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// recordJSON renders protobuf messages with their proto field names, zero fields included, as
// the admin endpoint does.
var recordJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// protoValue is m as protobuf JSON, to embed in a JSON document.
func protoValue(m proto.Message) (json.RawMessage, error) {
	b, err := recordJSON.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("render %T: %w", m, err)
	}
	return b, nil
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table writes aligned columns.
type table struct{ w *tabwriter.Writer }

// newTable starts a table with a header row.
func newTable(w io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row adds a row; an empty cell is shown as "-".
func (t *table) row(cells ...string) {
	for i, cell := range cells {
		if cell == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

// flush writes the table.
func (t *table) flush() error { return t.w.Flush() }

// instant renders unix microseconds in RFC 3339 UTC ("" for 0: none).
func instant(unixMicros int64) string {
	if unixMicros == 0 {
		return ""
	}
	return time.UnixMicro(unixMicros).UTC().Format(time.RFC3339Nano)
}

// encodeToken renders a list continuation for --after (base64url, as the admin endpoint's
// next_after); nil when there is none.
func encodeToken(continuation []byte) *string {
	if len(continuation) == 0 {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString(continuation)
	return &s
}

// decodeToken reads --after.
func decodeToken(after string) ([]byte, error) {
	if after == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(after)
	if err != nil {
		return nil, usagef("after: must be the continuation a previous page printed: %v", err)
	}
	return b, nil
}

// enumFlag parses a lower-case enum name ("timed_out") into its value of the proto enum whose
// names are prefix + upper case ("SAGA_PHASE_TIMED_OUT"); "" is 0 (no filter).
func enumFlag(flagName, v, prefix string, values map[string]int32, allowed string) (int32, error) {
	if v == "" {
		return 0, nil
	}
	n, ok := values[prefix+strings.ToUpper(strings.ReplaceAll(v, "-", "_"))]
	if !ok || n == 0 {
		return 0, usagef("%s: must be one of %s, got %q", flagName, allowed, v)
	}
	return n, nil
}

// enumName is the lower-case name of an enum value without its prefix.
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}
