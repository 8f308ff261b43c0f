package serviceaccount

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/munnerz/goautoneg"
)

// Paths of the OIDC discovery document and the JWKS, kube-apiserver's
// (pkg/serviceaccount/openidmetadata.go).
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/openid/v1/jwks"
)

// DiscoveryHandler serves the OIDC discovery document; jwksURI is where
// the JWKS is served.
func (k *Keys) DiscoveryHandler(jwksURI string) http.Handler {
	doc, _ := json.Marshal(map[string]any{
		"issuer":                                k.issuer,
		"jwks_uri":                              jwksURI,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
	})
	return jsonHandler(func() []byte { return doc }, "application/json")
}

// JWKSHandler serves the public keys of every published signing key.
func (k *Keys) JWKSHandler() http.Handler {
	return jsonHandler(func() []byte {
		verifiers := *k.verifiers.Load()
		var kids []string
		for kid := range verifiers {
			kids = append(kids, kid)
		}
		slices.Sort(kids)
		keys := []map[string]string{}
		for _, kid := range kids {
			point, err := verifiers[kid].Bytes() // 0x04 || X || Y
			if err != nil || len(point) != 65 {
				continue
			}
			keys = append(keys, map[string]string{"use": "sig", "kty": "EC", "crv": "P-256", "alg": "ES256", "kid": kid,
				"x": base64.RawURLEncoding.EncodeToString(point[1:33]), "y": base64.RawURLEncoding.EncodeToString(point[33:])})
		}
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return b
	}, "application/jwk-set+json")
}

func jsonHandler(body func() []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !accepts(r.Header.Values("Accept"), contentType) {
			// As kube-apiserver (go-restful's negotiation): a client must
			// accept what the document is.
			http.Error(w, "406: Not Acceptable: "+contentType, http.StatusNotAcceptable)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(body())
	})
}

// accepts reports whether the Accept header values admit contentType
// (none given admits anything), as the apiserver negotiates.
func accepts(values []string, contentType string) bool {
	return len(values) == 0 || goautoneg.Negotiate(strings.Join(values, ","), []string{contentType}) != ""
}
