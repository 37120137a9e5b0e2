package bga2a

import (
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
)

// challenges are the WWW-Authenticate challenges of a 401 (RFC 9110
// §11.6.1 requires at least one): one per scheme of WithSecurityScheme, in
// the order declared, each with the realm (the card's name) and, for a
// token scheme with scopes, the scopes the card requires:
//
//	HTTPAuthSecurityScheme      its scheme ("Bearer", "Basic", …)
//	OAuth2, OpenIDConnect       Bearer (their tokens are bearer tokens)
//	APIKeySecurityScheme        APIKey, with in= and name= of the key
//	MutualTLSSecurityScheme     none: the TLS handshake asks for it
//
// Without any, a Bearer challenge with the realm.
func challenges(realm string, schemes a2a.NamedSecuritySchemes, security []a2a.SecurityRequirements) []string {
	var out []string
	for _, req := range security {
		for name, scopes := range req { // one scheme per requirement (WithSecurityScheme)
			params := []string{"realm=" + quote(realm)}
			var scheme string
			switch s := deref(schemes[name]).(type) {
			case a2a.HTTPAuthSecurityScheme:
				scheme = canonicalScheme(s.Scheme)
			case a2a.OAuth2SecurityScheme, a2a.OpenIDConnectSecurityScheme:
				scheme = "Bearer"
			case a2a.APIKeySecurityScheme:
				scheme = "APIKey"
				params = append(params, "in="+quote(string(s.In)), "name="+quote(s.Name))
			default:
				continue
			}
			if scheme == "Bearer" && len(scopes) > 0 {
				params = append(params, "scope="+quote(strings.Join(scopes, " ")))
			}
			if c := scheme + " " + strings.Join(params, ", "); !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "Bearer realm="+quote(realm))
	}
	return out
}

// canonicalScheme writes an auth-scheme (case-insensitive) as registered:
// "bearer" is "Bearer".
func canonicalScheme(s string) string {
	if s == "" {
		return "Bearer"
	}
	return strings.ToUpper(s[:1]) + strings.ToLower(s[1:])
}

// quote is a quoted-string (RFC 9110 §5.6.4).
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// deref is the value of a scheme given as a pointer.
func deref(s a2a.SecurityScheme) a2a.SecurityScheme {
	switch p := s.(type) {
	case *a2a.HTTPAuthSecurityScheme:
		return *p
	case *a2a.OAuth2SecurityScheme:
		return *p
	case *a2a.OpenIDConnectSecurityScheme:
		return *p
	case *a2a.APIKeySecurityScheme:
		return *p
	}
	return s
}
