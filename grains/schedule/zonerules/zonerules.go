// Package zonerules owns the time-zone rules compiled into the binary: the IANA tzdata release
// they come from (Version) and each zone's compiled rules (TZif, the format of zic's output),
// read from the zoneinfo.zip embedded beside this file. Neither $ZONEINFO nor the host's zone
// database is ever read, so two silos built from the same source hold the same rules.
//
// A partition's leader carries the rules of a zone into the entry that needs them and every
// replica evaluates that zone with the rules in its state, never with its own (see the schedule
// package's "Zone rules"). scripts/update-tzdata.sh replaces the archive and Version with the
// Go toolchain's copy.
package zonerules

import (
	"archive/zip"
	"bytes"
	_ "embed" // the archive below
	"fmt"
	"io"
	"slices"
)

// Version is the IANA tzdata release of the embedded rules. Releases order as strings
// ("2025c" < "2026a"): a partition keeps the newest rules of a zone it has seen.
const Version = "2025c"

//go:embed zoneinfo.zip
var archive []byte

// index maps a zone name to its archive entry, built once at package initialization.
var index = func() map[string]*zip.File {
	r, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		panic(fmt.Sprintf("zonerules: the embedded zoneinfo.zip does not open: %v", err))
	}
	files := make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		files[f.Name] = f
	}
	return files
}()

// Lookup returns the compiled rules (TZif) of the IANA zone named zone, and false when the
// embedded release has no such zone.
func Lookup(zone string) ([]byte, bool) {
	f, ok := index[zone]
	if !ok {
		return nil, false
	}
	rc, err := f.Open()
	if err != nil {
		return nil, false
	}
	defer rc.Close()
	tzif, err := io.ReadAll(rc)
	if err != nil {
		return nil, false
	}
	return tzif, true
}

// Zones returns the names of every zone the embedded release holds, in order.
func Zones() []string {
	names := make([]string, 0, len(index))
	for name, f := range index {
		if !f.FileInfo().IsDir() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
