package site

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// A join is refused, for the joiner to retry, while a rotation of the CA
// is prepared and until the member it joins through took the new CA: the
// rotation seals the new CA's key for the members listed when it was
// prepared, and a member added in between could never open it (issue 48).
// Once the member signs with the new CA, the joiner gets it.
func TestJoinWaitsForARotationOfTheCA(t *testing.T) {
	var dir datadir.Dir
	b := cachertest.Open(t, func(c *config.Config) { dir = datadir.Dir(c.DataDir) })
	st := cachertest.Records(b)
	pki, err := access.LoadPKI(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.Peer(config.Site{MemberName: "gw-a", PeerAdvertiseAddress: "127.0.0.1", PeerPort: config.DefaultPeerPort}); err != nil {
		t.Fatal(err)
	}
	secrets, err := access.ReadSiteSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := WithJoin(http.NotFoundHandler(), dir, b.Client(), b.Leader, st)
	join := func() (int, string) {
		r := httptest.NewRequest(http.MethodPost, JoinPath, strings.NewReader(`{"name":"gw-b","peerURL":"https://127.0.0.1:1"}`))
		r.Header.Set("Authorization", "Bearer "+secrets.JoinSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	// refusal is what a failure prints of an answer: never the secrets
	// of one that admitted the joiner.
	refusal := func(code int, body string) string {
		if code == http.StatusOK {
			return "(the site's secrets)"
		}
		return body
	}
	members := func() int {
		list, err := b.Client().MemberList(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Members)
	}
	put := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutState(t.Context(), name, data); err != nil {
			t.Fatal(err)
		}
	}

	name, prep, err := access.PrepareRotation(dir, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	put(name, prep)
	if code, body := join(); code != http.StatusServiceUnavailable || !strings.Contains(body, "CA is being rotated") {
		t.Fatalf("a join while the rotation is prepared: HTTP %d %q, want 503 saying the CA is being rotated", code, refusal(code, body))
	}
	key, err := access.SealKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	rot, _, err := access.NewRotation(dir, prep, map[string][]byte{"gw-a": key})
	if err != nil {
		t.Fatal(err)
	}
	put(name, rot)
	if code, body := join(); code != http.StatusServiceUnavailable {
		t.Fatalf("a join before this member took the rotation: HTTP %d %q, want 503", code, refusal(code, body))
	}
	if n := members(); n != 1 {
		t.Fatalf("the refused joins left %d members, want 1", n)
	}

	if _, err := pki.ApplyRotation(dir, rot, "gw-a"); err != nil {
		t.Fatal(err)
	}
	if secrets, err = access.ReadSiteSecrets(dir); err != nil { // the rotation's join secret
		t.Fatal(err)
	}
	code, body := join()
	if code != http.StatusOK {
		t.Fatalf("a join once this member took the new CA: HTTP %d %q", code, body)
	}
	var resp joinResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	next, err := rot.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Secrets == nil || !strings.HasPrefix(string(resp.Secrets.CACert), string(rot.CACert)) {
		t.Fatalf("the joiner did not get the new CA %s first in its bundle", next.Subject.CommonName)
	}
	if n := members(); n != 2 {
		t.Fatalf("%d members after the join, want 2", n)
	}
}
