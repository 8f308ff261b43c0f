// Package serviceaccount gives ServiceAccounts what a cluster gives them:
// signed, audience- and expiry-bound tokens (TokenRequest, the
// serviceaccounts/token subresource) that authenticate as
// system:serviceaccount:<namespace>:<name>, the OIDC discovery document and
// JWKS that let a relying party verify them offline, a default
// ServiceAccount and the kube-root-ca.crt ConfigMap in every namespace,
// and the admission check that refuses pods naming a ServiceAccount that
// does not exist. Upstream: k8s.io/kubernetes pkg/serviceaccount,
// pkg/registry/core/serviceaccount/storage/token.go,
// pkg/controller/serviceaccount, pkg/controller/certificates/rootcacertpublisher
// and plugin/pkg/admission/serviceaccount.
package serviceaccount

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records/family"
)

// KeyFile is the signing key under <data-dir>/pki/.
const KeyFile = "service-account.key"

// State is where each kubestore publishes its token verification key and
// CA, so that several kubestores on one etcd accept each other's tokens
// and publish one CA bundle (kubestore's own records: package records).
type State interface {
	PutState(ctx context.Context, name string, value []byte) error
	ListState(ctx context.Context, dir string) (map[string][]byte, error)
	DeleteState(ctx context.Context, name string) error
}

// Keys signs tokens with this process's key and verifies those of every
// published one.
type Keys struct {
	issuer string
	signer *ecdsa.PrivateKey
	kid    string
	// caPEM is this process's CA bundle, which a rotation replaces.
	caPEM atomic.Pointer[[]byte]
	// verifiers are the published public keys by key id, and bundle the
	// published CAs, sorted.
	verifiers atomic.Pointer[map[string]*ecdsa.PublicKey]
	bundle    atomic.Pointer[[]byte]
	// bundleChanged has a value once bundle changed (BundleChanged).
	bundleChanged chan struct{}
	// st is where keys are published; lastRefresh limits the reads a
	// token of an unknown key causes.
	st          State
	lastRefresh atomic.Int64
}

// unknownKeyRefresh is the least time between two reads of the published
// keys caused by tokens signed with an unknown key (a kubestore that
// joined the etcd after this one).
const unknownKeyRefresh = 5 * time.Second

// verifier is the published key kid, read again from etcd when unknown.
func (k *Keys) verifier(ctx context.Context, kid string) (*ecdsa.PublicKey, bool) {
	if pub, ok := (*k.verifiers.Load())[kid]; ok {
		return pub, true
	}
	last := k.lastRefresh.Load()
	if k.st == nil || time.Since(time.Unix(0, last)) < unknownKeyRefresh || !k.lastRefresh.CompareAndSwap(last, time.Now().UnixNano()) {
		return nil, false
	}
	if err := k.Refresh(ctx, k.st); err != nil {
		klog.ErrorS(err, "Reading the published service account keys")
	}
	pub, ok := (*k.verifiers.Load())[kid]
	return pub, ok
}

// LoadKeys loads the signing key from <data-dir>/pki/, creating it on the
// first start. ES256 (ECDSA P-256), which kube-apiserver accepts for
// service account keys: generated in milliseconds on a gateway's CPU,
// where an RSA key takes seconds. caPEM is the CA clients verify the
// server with (kube-root-ca.crt).
func LoadKeys(dir datadir.Dir, issuer string, caPEM []byte) (*Keys, error) {
	path := filepath.Join(dir.PKI(), KeyFile)
	var key *ecdsa.PrivateKey
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		block, _ := pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s: no PEM key", path)
		}
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var ok bool
		if key, ok = parsed.(*ecdsa.PrivateKey); !ok || key.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%s: want an ECDSA P-256 key, got %T", path, parsed)
		}
	case errors.Is(err, os.ErrNotExist):
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir.PKI(), 0o700); err != nil {
			return nil, err
		}
		if err := datadir.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	default:
		return nil, err
	}
	kid, err := keyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	k := &Keys{issuer: issuer, signer: key, kid: kid, bundleChanged: make(chan struct{}, 1)}
	k.caPEM.Store(&caPEM)
	k.verifiers.Store(&map[string]*ecdsa.PublicKey{kid: &key.PublicKey})
	bundle := slices.Clone(caPEM)
	k.bundle.Store(&bundle)
	return k, nil
}

// keyID is upstream's: the unpadded base64url SHA-256 of the public key's
// DER (pkg/serviceaccount/jwt.go keyIDFromPublicKey).
func keyID(pub *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// Publish records this process's public key and CA, and reads every
// published one: tokens of any kubestore on the etcd verify here, and the
// CA bundle holds every CA.
func (k *Keys) Publish(ctx context.Context, st State) error {
	k.st = st
	der, err := x509.MarshalPKIXPublicKey(&k.signer.PublicKey)
	if err != nil {
		return err
	}
	if err := st.PutState(ctx, family.ServiceAccountKeys.For(k.kid), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err != nil {
		return err
	}
	caPEM := *k.caPEM.Load()
	if err := st.PutState(ctx, caRecord(caPEM), caPEM); err != nil {
		return err
	}
	return k.Refresh(ctx, st)
}

// PublishCA publishes caPEM, this process's CA bundle after a step of a
// rotation, in place of the one it published before, and reads every
// published one. A site's members share their bundle and its record: the
// first to take the step deletes the previous record for all, and one that
// starts later publishes it again until it takes the step too.
func (k *Keys) PublishCA(ctx context.Context, st State, caPEM []byte) error {
	before := *k.caPEM.Swap(&caPEM)
	if err := st.PutState(ctx, caRecord(caPEM), caPEM); err != nil {
		return err
	}
	if !bytes.Equal(before, caPEM) {
		if err := st.DeleteState(ctx, caRecord(before)); err != nil {
			return err
		}
	}
	return k.Refresh(ctx, st)
}

// caRecord names the record of the CA bundle caPEM.
func caRecord(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return family.CABundle.For(base64.RawURLEncoding.EncodeToString(sum[:]))
}

// Refresh reads the published keys and CAs.
func (k *Keys) Refresh(ctx context.Context, st State) error {
	keys, err := st.ListState(ctx, family.ServiceAccountKeys.Dir())
	if err != nil {
		return err
	}
	verifiers := map[string]*ecdsa.PublicKey{k.kid: &k.signer.PublicKey}
	for name, value := range keys {
		block, _ := pem.Decode(value)
		if block == nil {
			continue
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if ec, ok := pub.(*ecdsa.PublicKey); err == nil && ok {
			verifiers[strings.TrimPrefix(name, family.ServiceAccountKeys.Start())] = ec
		} else {
			klog.InfoS("Ignoring a published service account key", "record", name, "err", err)
		}
	}
	k.verifiers.Store(&verifiers)
	cas, err := st.ListState(ctx, family.CABundle.Dir())
	if err != nil {
		return err
	}
	var names []string
	for name := range cas {
		names = append(names, name)
	}
	slices.Sort(names)
	// Each certificate once: the bundles of several processes (a site's
	// members during a rotation) hold the same CAs.
	var bundle []byte
	seen := map[string]bool{}
	for _, name := range names {
		rest := cas[name]
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if !seen[string(b.Bytes)] {
				seen[string(b.Bytes)] = true
				bundle = append(bundle, pem.EncodeToMemory(b)...)
			}
		}
	}
	if len(bundle) == 0 {
		bundle = slices.Clone(*k.caPEM.Load())
	}
	if before := k.bundle.Swap(&bundle); !bytes.Equal(*before, bundle) {
		select {
		case k.bundleChanged <- struct{}{}:
		default:
		}
	}
	return nil
}

// BundleChanged receives once CABundle changed since the last receive.
func (k *Keys) BundleChanged() <-chan struct{} { return k.bundleChanged }

// CABundle is every published CA, in a stable order.
func (k *Keys) CABundle() []byte { return slices.Clone(*k.bundle.Load()) }

// Issuer is the iss of the tokens.
func (k *Keys) Issuer() string { return k.issuer }
