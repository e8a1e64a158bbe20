package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// CookieName is the cookie a ?token= link sets.
const CookieName = "whimbrel_web"

// keys are what the token is compared with, and what is derived from it:
// the cookie holds a value derived from the token rather than the token
// itself, and forms carry a CSRF value derived from it.
type keys struct {
	token  [32]byte // SHA-256 of the token: compared in constant time, whatever its length
	cookie string
	csrf   string
}

func deriveKeys(token string) keys {
	mac := func(purpose string) string {
		m := hmac.New(sha256.New, []byte(token))
		m.Write([]byte("whimbrel web " + purpose))
		return hex.EncodeToString(m.Sum(nil))
	}
	return keys{token: sha256.Sum256([]byte(token)), cookie: mac("cookie"), csrf: mac("csrf")}
}

func (k keys) tokenOK(given string) bool {
	h := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(h[:], k.token[:]) == 1
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// NewToken returns a random token: 32 bytes, hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a web token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// CheckAddr refuses to listen beyond loopback with a token nobody chose:
// a generated token is printed on a terminal, and a page open to the
// network must not depend on who saw it.
func CheckAddr(addr string, tokenGiven bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if Loopback(host) || tokenGiven {
		return nil
	}
	return fmt.Errorf("address %q is not loopback: give the token explicitly (--token-file or WHIMBREL_WEB_TOKEN) to serve beyond this machine", addr)
}

// Loopback reports whether host names this machine only.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the address to open: with the token, which the first page turns
// into a cookie.
func URL(addr net.Addr, path, token string) string { return SchemeURL("http", addr, path, token) }

// SchemeURL is URL with the scheme given ("https" when serving TLS).
func SchemeURL(scheme string, addr net.Addr, path, token string) string {
	host := addr.String()
	if tcp, ok := addr.(*net.TCPAddr); ok && (tcp.IP == nil || tcp.IP.IsUnspecified()) {
		host = net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	return scheme + "://" + host + path + "?token=" + url.QueryEscape(token)
}

type authKind int

const (
	authNone authKind = iota
	authCookie
	authBearer
)

func (a authKind) String() string {
	switch a {
	case authCookie:
		return "cookie"
	case authBearer:
		return "bearer"
	}
	return "none"
}

func (s *Server) authenticate(r *http.Request) authKind {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") && s.keys.tokenOK(strings.TrimSpace(tok)) {
			return authBearer
		}
		return authNone
	}
	if c, err := r.Cookie(CookieName); err == nil && equal(c.Value, s.keys.cookie) {
		return authCookie
	}
	return authNone
}

type authKey struct{}

// guard lets through only requests that present the token. A ?token= in
// the address of a GET is exchanged for a cookie, and the browser sent
// back to the same address without it, so the token does not linger in
// the address bar, the history or a Referer.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" { // for load balancers; reads nothing
			next.ServeHTTP(w, r)
			return
		}
		if presents(r) {
			if no, wait, first := s.fails.refused(clientAddr(r)); no {
				if first {
					s.log.Warn("refusing credentials from a client that failed to authenticate too often", "client", clientAddr(r), "retry_after", wait.Round(time.Second))
				}
				s.tooMany(w, r, wait)
				return
			}
		}
		q := r.URL.Query()
		if q.Has("token") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if !s.keys.tokenOK(q.Get("token")) {
				s.failedAuth(w, r, "token in the address")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.keys.cookie, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
			q.Del("token")
			// The same path as asked, escaped as asked (an ID may hold
			// %2F), and never "//host": a path of this site only.
			to := "/" + strings.TrimLeft(r.URL.EscapedPath(), "/")
			if rest := q.Encode(); rest != "" {
				to += "?" + rest
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		kind := s.authenticate(r)
		if kind == authNone {
			s.failedAuth(w, r, credentialOf(r))
			return
		}
		next.ServeHTTP(w, r.WithContext(withAuth(r.Context(), kind)))
	})
}

// failedAuth logs and counts a request whose credential is wrong (what is
// named, never its value), and answers it 401. A request that presents
// none is no guess: it is logged at debug level only, and not counted.
func (s *Server) failedAuth(w http.ResponseWriter, r *http.Request, credential string) {
	if credential == "" {
		s.log.Debug("request without a token", "client", clientAddr(r), "method", r.Method, "path", r.URL.Path)
	} else {
		s.log.Warn("failed authentication", "client", clientAddr(r), "credential", credential, "method", r.Method, "path", r.URL.Path)
		s.fails.failed(clientAddr(r))
	}
	s.unauthorized(w, r)
}

// credentialOf names the credential a request presents ("" for none).
func credentialOf(r *http.Request) string {
	switch {
	case r.Header.Get("Authorization") != "":
		return "authorization header"
	case r.URL.Query().Has("token"):
		return "token in the address"
	}
	if _, err := r.Cookie(CookieName); err == nil {
		return "cookie"
	}
	return ""
}

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="whimbrel"`)
	if wantsJSON(r) {
		writeJSONError(w, http.StatusUnauthorized, "a valid token is required: send Authorization: Bearer TOKEN")
		return
	}
	s.renderError(w, r, http.StatusUnauthorized, "A valid token is required",
		"Open the address whimbrel web (or whimbrel up, or whimbrel run --web) printed when it started (it ends in ?token=…), or ask whoever runs it.")
}

// csrfOK checks a state-changing request. A bearer token is never sent by a
// browser on its own, so it needs nothing more; a cookie is, so a request
// that relies on the cookie must also carry the form's CSRF value.
func (s *Server) csrfOK(r *http.Request) bool {
	switch authOf(r.Context()) {
	case authBearer:
		return true
	case authCookie:
		v := r.Header.Get("X-CSRF-Token")
		if v == "" {
			v = r.PostFormValue("csrf")
		}
		return equal(v, s.keys.csrf)
	}
	return false
}

// secure sets the headers every answer carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// Token chooses the token: the first line of file if one is named, else
// env (WHIMBREL_WEB_TOKEN), else a random one. given says someone chose
// it, which serving beyond loopback requires.
func Token(file, env string) (token string, given bool, err error) {
	switch {
	case file != "":
		fi, err := os.Stat(file)
		if err != nil {
			return "", false, fmt.Errorf("read the web token: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", false, fmt.Errorf("the web token file %s is open to group or others (mode %04o): anyone who reads it can act as you in the web view; run `chmod 600 %s`, then start again",
				file, fi.Mode().Perm(), shellWord(file))
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", false, fmt.Errorf("read the web token: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		token = strings.TrimSpace(line)
		if token == "" {
			return "", false, fmt.Errorf("read the web token: %s is empty", file)
		}
		return token, true, nil
	case env != "":
		return strings.TrimSpace(env), true, nil
	}
	token, err = NewToken()
	return token, false, err
}

// minDistinct is the fewest different characters a chosen token should
// have: a token such as "aaaaaaaaaaaaaaaa" or "1234123412341234" passes
// MinTokenLength but is guessed at once.
const minDistinct = 8

// WeakToken returns why a chosen token is easy to guess, or "".
func WeakToken(token string) string {
	seen := map[rune]bool{}
	for _, c := range token {
		seen[c] = true
	}
	if len(seen) >= minDistinct {
		return ""
	}
	return fmt.Sprintf("the web token has only %d different characters (fewer than %d): it is easy to guess; make one with `openssl rand -hex 32`", len(seen), minDistinct)
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
