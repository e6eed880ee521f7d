package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"
)

// The listener's guard (issue 29). Off loopback the listener speaks TLS
// (cmd/mesh refuses it otherwise) and asks the operator's credential, a
// bearer token (busauth.HTTPToken), on everything but /healthz: what
// status shows names every node, module and failure of the mesh. On any
// address it checks the Host a request names, against DNS rebinding: a
// page of another site that a browser was made to reach the listener
// through a name of its own sends that name as Host. An IP literal cannot
// be rebound, so it passes; a name must be localhost or one the operator
// gave (--http-host).

// tokenCookie keeps the token in a browser that opened the page with
// ?token=: the page's own requests carry it, and the address bar does not.
const tokenCookie = "mesh_token"

// guard wraps next with the Host check and, when token is set, the
// credential check.
func guard(next http.Handler, token string, hosts []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, hosts) {
			http.Error(w, "refused: this listener does not serve the name "+r.Host+"; reach it by its address, or give the name to mesh with --http-host", http.StatusMisdirectedRequest)
			return
		}
		if token == "" || r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query().Get("token"); q != "" && same(q, token) {
			// Kept in a cookie only this listener's pages send, over TLS;
			// the address without it is where the browser goes on.
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if !authorized(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mesh"`)
			http.Error(w, "unauthorized: give the operator's token (mesh http-token) as Authorization: Bearer TOKEN, or open the page once with ?token=TOKEN", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func authorized(r *http.Request, token string) bool {
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && same(bearer, token) {
		return true
	}
	c, err := r.Cookie(tokenCookie)
	return err == nil && same(c.Value, token)
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// hostAllowed says whether a request naming host (with or without a port)
// may be answered.
func hostAllowed(host string, names []string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" {
		return true
	}
	return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(strings.TrimSuffix(n, "."), h) })
}
