// Package console serves the merchandiser console: one page of plain HTML, CSS
// and JavaScript embedded in the binary (no build step, nothing fetched from
// elsewhere). Loading the page needs no token; the page keeps the bearer token
// its user signs in with in sessionStorage and sends it on every API call, so the
// API's roles and validation apply exactly as to any other client.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// Prefix is where the console is served.
const Prefix = "/console/"

//go:embed static
var static embed.FS

// Handler serves the console's files under Prefix.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic("console: embedded files: " + err.Error()) // the embed pattern above guarantees the directory
	}
	serve := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The page runs only its own script and talks only to this origin; no
		// inline script or style is needed, so none is allowed.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary; revalidate rather than run an old script.
		h.Set("Cache-Control", "no-cache")
		serve.ServeHTTP(w, r)
	})
}
