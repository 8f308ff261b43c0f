package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"reflect"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// newTestCA is a CA valid a day either side of now.
func newTestCA(t *testing.T, now time.Time) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &authority{cert: cert, key: key}
}

// TestKeyUsagesFromStrings in k8s.io/kubernetes
// pkg/controller/certificates/authority/policies_test.go.
func TestKeyUsagesFromStrings(t *testing.T) {
	tests := []struct {
		usages  []certificatesv1.KeyUsage
		ku      x509.KeyUsage
		eku     []x509.ExtKeyUsage
		wantErr bool
	}{
		{usages: []certificatesv1.KeyUsage{"signing"}, ku: x509.KeyUsageDigitalSignature},
		{usages: []certificatesv1.KeyUsage{"client auth"}, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{usages: []certificatesv1.KeyUsage{"client auth", "client auth"}, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{usages: []certificatesv1.KeyUsage{"cert sign", "encipher only"}, ku: x509.KeyUsageCertSign | x509.KeyUsageEncipherOnly},
		{usages: []certificatesv1.KeyUsage{"ocsp signing", "crl sign", "s/mime", "content commitment"}, ku: x509.KeyUsageCRLSign | x509.KeyUsageContentCommitment,
			eku: []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection, x509.ExtKeyUsageOCSPSigning}},
		{usages: []certificatesv1.KeyUsage{"unsupported string"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.usages), func(t *testing.T) {
			ku, eku, err := keyUsagesFromStrings(tt.usages)
			if tt.wantErr {
				if err == nil {
					t.Error("no error")
				}
				return
			}
			if err != nil || ku != tt.ku || !reflect.DeepEqual(eku, tt.eku) {
				t.Errorf("got (%v, %v, %v), want (%v, %v)", ku, eku, err, tt.ku, tt.eku)
			}
		})
	}
}

// TestCertificateAuthority in authority/authority_test.go: what a signed
// certificate holds under each policy.
func TestCertificateAuthority(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	nowFunc := func() time.Time { return now }
	uri, err := url.Parse("help://me@what:8080/where/when?why=true")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		NotBefore, NotAfter time.Time
		KeyUsage            x509.KeyUsage
		ExtKeyUsage         []x509.ExtKeyUsage
		URIs                []string
	}
	tests := []struct {
		name      string
		cr        x509.CertificateRequest
		policy    permissivePolicy
		expiredCA bool
		want      got
		wantErr   string
	}{
		{name: "ca info", policy: permissivePolicy{TTL: time.Hour, Now: nowFunc}, want: got{NotBefore: now, NotAfter: now.Add(time.Hour)}},
		{name: "key usage", policy: permissivePolicy{TTL: time.Hour, Usages: []certificatesv1.KeyUsage{"signing"}, Now: nowFunc},
			want: got{NotBefore: now, NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}},
		{name: "ext key usage", policy: permissivePolicy{TTL: time.Hour, Usages: []certificatesv1.KeyUsage{"client auth"}, Now: nowFunc},
			want: got{NotBefore: now, NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
		{name: "backdate without short", policy: permissivePolicy{TTL: time.Hour, Backdate: 5 * time.Minute, Now: nowFunc},
			want: got{NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(55 * time.Minute)}},
		{name: "backdate without short and super small ttl", policy: permissivePolicy{TTL: time.Minute, Backdate: 5 * time.Minute, Now: nowFunc},
			want: got{NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(-4 * time.Minute)}},
		{name: "backdate with short", policy: permissivePolicy{TTL: time.Hour, Backdate: 5 * time.Minute, Short: 8 * time.Hour, Now: nowFunc},
			want: got{NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(time.Hour)}},
		{name: "backdate with short and super small ttl", policy: permissivePolicy{TTL: time.Minute, Backdate: 5 * time.Minute, Short: 8 * time.Hour, Now: nowFunc},
			want: got{NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(time.Minute)}},
		{name: "backdate with short but longer ttl", policy: permissivePolicy{TTL: 24 * time.Hour, Backdate: 5 * time.Minute, Short: 8 * time.Hour, Now: nowFunc},
			want: got{NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(24*time.Hour - 5*time.Minute)}},
		{name: "truncate expiration", policy: permissivePolicy{TTL: 48 * time.Hour, Now: nowFunc}, want: got{NotBefore: now, NotAfter: now.Add(24 * time.Hour)}},
		{name: "uri sans", policy: permissivePolicy{TTL: time.Hour, Now: nowFunc}, cr: x509.CertificateRequest{URIs: []*url.URL{uri}},
			want: got{NotBefore: now, NotAfter: now.Add(time.Hour), URIs: []string{uri.String()}}},
		{name: "expired ca", policy: permissivePolicy{TTL: time.Hour, Now: nowFunc}, expiredCA: true, wantErr: "the signer has expired: NotAfter=" + now.String()},
		{name: "expired ca with backdate", policy: permissivePolicy{TTL: time.Hour, Backdate: 5 * time.Minute, Now: nowFunc}, expiredCA: true,
			wantErr: "refusing to sign a certificate that expired in the past: NotAfter=" + now.String()},
	}
	ca := newTestCA(t, now)
	crKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caCert := *ca.cert
			if tt.expiredCA {
				caCert.NotAfter = now
			}
			csr, err := x509.CreateCertificateRequest(rand.Reader, &tt.cr, crKey)
			if err != nil {
				t.Fatal(err)
			}
			der, _, err := (&authority{cert: &caCert, key: ca.key}).sign(csr, tt.policy)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			g := got{NotBefore: cert.NotBefore, NotAfter: cert.NotAfter, KeyUsage: cert.KeyUsage, ExtKeyUsage: cert.ExtKeyUsage}
			for _, u := range cert.URIs {
				g.URIs = append(g.URIs, u.String())
			}
			if !g.NotBefore.Equal(tt.want.NotBefore) || !g.NotAfter.Equal(tt.want.NotAfter) || g.KeyUsage != tt.want.KeyUsage ||
				!reflect.DeepEqual(g.ExtKeyUsage, tt.want.ExtKeyUsage) || !reflect.DeepEqual(g.URIs, tt.want.URIs) {
				t.Errorf("got %+v, want %+v", g, tt.want)
			}
			// The CA's information: issuer, authority key, a leaf.
			if cert.Issuer.CommonName != "test-ca" || !reflect.DeepEqual(cert.AuthorityKeyId, ca.cert.SubjectKeyId) || !cert.BasicConstraintsValid || cert.IsCA {
				t.Errorf("issuer %v, authority key %x, basic constraints %v, CA %v", cert.Issuer, cert.AuthorityKeyId, cert.BasicConstraintsValid, cert.IsCA)
			}
			if err := cert.CheckSignatureFrom(ca.cert); err != nil {
				t.Errorf("not signed by the CA: %v", err)
			}
		})
	}
}
