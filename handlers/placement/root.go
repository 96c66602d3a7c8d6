package placement

import (
	"context"
	"net/http"
)

// root handles GET /: the version document, no auth needed.
func (a *API) root(w http.ResponseWriter, r *http.Request) error {
	doc := map[string]any{"versions": []map[string]any{{
		"id": "v1.0", "max_version": maxVersion.String(), "min_version": minVersion.String(),
		"status": "CURRENT", "links": []map[string]string{{"rel": "self", "href": ""}},
	}}}
	return writeJSON(w, r, http.StatusOK, doc, a.started)
}

// Mount returns the API mounted under prefix ("/placement") for the main
// listener: links and Location headers include the prefix.
func (a *API) Mount(prefix string) http.Handler {
	h := a.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(context.WithValue(r.Context(), prefixKey{}, prefix))
		p := r.URL.Path[len(prefix):]
		if p == "" {
			p = "/"
		}
		r2.URL.Path = p
		r2.URL.RawPath = ""
		h.ServeHTTP(w, r2)
	})
}
