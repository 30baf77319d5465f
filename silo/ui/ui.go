// Package ui owns the silo's web UI: static HTML, CSS and JavaScript, embedded in the binary and
// served by the admin endpoint under /ui/. The pages call the admin endpoint's JSON routes
// (schedules, ledger, lanes, partitions, pause/resume/trigger) from the browser; they need no
// build step. A token entered in the page is kept in the tab's sessionStorage and sent with every
// request as "Authorization: Bearer <token>".
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// Handler serves the UI's files for paths under Prefix.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return http.StripPrefix(Prefix, http.FileServerFS(files))
}
