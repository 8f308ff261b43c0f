package certificates

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// Two signers on one etcd: the second writes the resourceVersion it read,
// gets a conflict, and on the retry reads the request again, now with the
// first one's certificate, and writes nothing.
func TestSigningControllerConflict(t *testing.T) {
	csrs := &fakeCSRs{err: apierrors.NewConflict(certificatesv1.Resource("certificatesigningrequests"), "csr", nil)}
	c, err := newSigningController(csrs, newTestCA(t, time.Now()), DefaultDuration)
	if err != nil {
		t.Fatal(err)
	}
	c.store = cache.NewStore(cache.MetaNamespaceKeyFunc)
	csr := makeTestCSR(t, csrBuilder{signerName: certificatesv1.KubeAPIServerClientKubeletSignerName, cn: "system:node:a", org: []string{"system:nodes"},
		usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, approved: true})
	if err := c.store.Add(csr); err != nil {
		t.Fatal(err)
	}
	c.queue.Add("csr")
	if !c.processNext(t.Context()) {
		t.Fatal("queue shut down")
	}
	if len(csrs.written) != 1 || csrs.written[0].ResourceVersion != "7" || len(csrs.written[0].Status.Certificate) == 0 {
		t.Fatalf("want one certificate written at the resourceVersion read, got %d writes", len(csrs.written))
	}
	if c.queue.NumRequeues("csr") != 1 {
		t.Errorf("the conflict was not retried: %d requeues", c.queue.NumRequeues("csr"))
	}

	// The other signer's write reaches the informer.
	signed := csr.DeepCopy()
	signed.ResourceVersion = "8"
	signed.Status.Certificate = csrs.written[0].Status.Certificate
	if err := c.store.Update(signed); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(t.Context(), "csr"); err != nil {
		t.Fatal(err)
	}
	if len(csrs.written) != 1 {
		t.Errorf("signed again after the conflict: %d writes", len(csrs.written))
	}
	// A request deleted meanwhile is no error.
	if err := c.store.Delete(signed); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(t.Context(), "csr"); err != nil {
		t.Errorf("sync of a deleted request: %v", err)
	}
	c.queue.ShutDown()
}
