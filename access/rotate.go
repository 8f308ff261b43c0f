package access

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records/family"
)

// The rotation of a CA (kubestore ca rotate, docs/RELIABILITY.md). It is
// prepared first: each member creates a seal key for it alone (seal.go).
// Then a new CA is certified by the current one (the cross certificate) and takes
// over the signing: every leaf is issued anew by it and carries the cross
// certificate, so that a peer or client that trusts only the previous CA
// still verifies it (etcd reads its trusted CAs only when it starts), and
// everything trusts both CAs until the rotation is finished. Finishing
// drops the previous CA: client certificates it signed are refused from
// then on. A site's members take each step from the record of the
// rotation in etcd, which holds the new CA's key and the site's new join
// secret sealed for each member.

// crossFile holds the cross certificate: the signing CA certified by the
// previous one.
const crossFile = "ca-cross.crt"

// RotationPhase is how far a rotation is.
type RotationPhase string

const (
	// PhasePrepare: each member publishes its seal key; nothing changes yet.
	PhasePrepare RotationPhase = "prepare"
	// PhaseBoth: the new CA signs; both CAs are trusted.
	PhaseBoth RotationPhase = "both"
	// PhaseFinished: only the new CA is trusted.
	PhaseFinished RotationPhase = "finished"
)

// Rotation is the record of one rotation, under RotationName of the CA it
// replaces.
type Rotation struct {
	Phase   RotationPhase `json:"phase"`
	Started time.Time     `json:"started"`
	// CACert is the new CA (PEM), Cross the new CA certified by the
	// previous one; Sealed holds each member's RotationSecrets, sealed
	// for the seal key it published (by name), Ephemeral the sealing
	// side's public key. Empty while prepared.
	CACert    []byte            `json:"caCert,omitempty"`
	Cross     []byte            `json:"cross,omitempty"`
	Sealed    map[string][]byte `json:"sealed,omitempty"`
	Ephemeral []byte            `json:"ephemeral,omitempty"`
	// CAKey is the new CA's key sealed with the site's join secret, as
	// releases before the seal keys wrote it: a rotation they began
	// still completes.
	CAKey []byte `json:"caKey,omitempty"`
}

// Certificate is the rotation's new CA.
func (r Rotation) Certificate() (*x509.Certificate, error) {
	c, err := x509.ParseCertificate(pemBlock(r.CACert))
	if err != nil {
		return nil, fmt.Errorf("the rotation's CA: %w", err)
	}
	return c, nil
}

// RotationProgress is a member's record of where it stands in a rotation,
// under RotationName(previous CA) + "/members/" + the member's name.
type RotationProgress struct {
	Phase RotationPhase `json:"phase"`
	At    time.Time     `json:"at"`
	// PreviousCAClients are the users who authenticated here with a client
	// certificate of the previous CA since the rotation began, with the
	// last time: they are refused once the rotation is finished. A
	// restart keeps them (the member reads its record back).
	PreviousCAClients map[string]time.Time `json:"previousCAClients,omitempty"`
	// SealKey is the member's public seal key for the rotation, while it
	// is prepared.
	SealKey []byte `json:"sealKey,omitempty"`
	// PeerTrustsPrevious: this member's etcd peer port, which reads its
	// trusted CAs at its start, still trusts the previous CA.
	PeerTrustsPrevious bool `json:"peerTrustsPrevious,omitempty"`
}

// RotationName names the record of the rotation that replaces the CA of
// DER caDER: kubestores on one etcd with other CAs ignore it.
func RotationName(caDER []byte) string {
	sum := sha256.Sum256(caDER)
	return family.CARotations.For(hex.EncodeToString(sum[:8]))
}

// ProgressName names member's record of the rotation of record name.
func ProgressName(rotation, member string) string { return rotation + "/members/" + member }

// Signing is the DER of the CA that signs.
func (p *PKI) Signing() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caCert.Raw
}

// Previous is the DER of the CA a rotation under way replaces: trusted,
// no longer signing. Nil without one.
func (p *PKI) Previous() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.previous()
}

func (p *PKI) previous() []byte {
	for _, der := range pemCerts(p.caPEM) {
		if !bytes.Equal(der, p.caCert.Raw) {
			return der
		}
	}
	return nil
}

// PrepareRotation is the record that begins the rotation of dir's CA:
// each member publishes a seal key for it (SealKey), then NewRotation
// seals the new CA for them.
func PrepareRotation(dir datadir.Dir, now time.Time) (string, Rotation, error) {
	bundle, caCert, _, err := readPair(filepath.Join(dir.PKI(), "ca.crt"), filepath.Join(dir.PKI(), "ca.key"))
	if err != nil {
		return "", Rotation{}, fmt.Errorf("reading the CA: %w", err)
	}
	if len(pemCerts(bundle)) > 1 {
		return "", Rotation{}, errors.New("a rotation of the CA is under way: finish it first (kubestore ca finish)")
	}
	return RotationName(caCert.Raw), Rotation{Phase: PhasePrepare, Started: now}, nil
}

// NewRotation makes the prepared rotation prep of the CA of dir: a new
// CA, its cross certificate, and a new join secret, sealed with the new
// CA's key for each member's seal key (by name). Nothing is written to
// dir: each member takes the steps of the record in etcd
// (PKI.ApplyRotation), this one too. The join token it returns is the
// site's from then on.
func NewRotation(dir datadir.Dir, prep Rotation, sealKeys map[string][]byte) (Rotation, string, error) {
	pki := dir.PKI()
	bundle, caCert, caKey, err := readPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		return Rotation{}, "", fmt.Errorf("reading the CA: %w", err)
	}
	if len(pemCerts(bundle)) > 1 {
		return Rotation{}, "", errors.New("a rotation of the CA is under way: finish it first (kubestore ca finish)")
	}
	der, key, err := newCA(fmt.Sprintf("kubestore-ca@%d", prep.Started.Unix()))
	if err != nil {
		return Rotation{}, "", err
	}
	next, err := x509.ParseCertificate(der)
	if err != nil {
		return Rotation{}, "", err
	}
	notAfter := next.NotAfter
	if caCert.NotAfter.Before(notAfter) {
		notAfter = caCert.NotAfter // no longer than the CA that certifies it
	}
	cross := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               next.Subject,
		SubjectKeyId:          next.SubjectKeyId,
		NotBefore:             next.NotBefore,
		NotAfter:              notAfter,
		KeyUsage:              next.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	crossDER, err := x509.CreateCertificate(rand.Reader, cross, caCert, next.PublicKey, caKey)
	if err != nil {
		return Rotation{}, "", fmt.Errorf("certifying the new CA: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Rotation{}, "", err
	}
	secret, err := newJoinSecret()
	if err != nil {
		return Rotation{}, "", err
	}
	r := Rotation{Phase: PhaseBoth, Started: prep.Started, CACert: certPEM(der), Cross: certPEM(crossDER)}
	if r.Ephemeral, r.Sealed, err = sealFor(sealKeys, r.CACert, RotationSecrets{CAKey: keyPEM, JoinSecret: secret}); err != nil {
		return Rotation{}, "", err
	}
	return r, config.FormatJoinToken(der, secret), nil
}

// ApplyRotation takes r's phase on dir's PKI for member, if it has not
// yet: the new CA signs, and is trusted with the previous one, and the
// join secret is the new one (PhaseBoth); then the new CA alone is
// trusted (PhaseFinished). It reports whether it changed anything; Renew
// and WriteKubeconfig then issue the leaves anew.
//
// Each file is written atomically, in an order that leaves a PKI that
// loads at every step (loadCA signs with the certificate of ca.crt that
// matches ca.key): the cross certificate, then ca.crt trusting both, then
// the new key, then ca.crt with the new CA first, then the join secret.
func (p *PKI) ApplyRotation(dir datadir.Dir, r Rotation, member string) (bool, error) {
	if r.Phase == PhasePrepare {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next, err := r.Certificate()
	if err != nil {
		return false, err
	}
	type write struct {
		file string
		data []byte
	}
	var writes []write
	switch {
	case !p.caCert.Equal(next):
		secrets, err := openRotation(dir, r, member, next)
		if err != nil {
			return false, err
		}
		previous := certPEM(p.caCert.Raw)
		writes = append(writes,
			write{crossFile, r.Cross},
			write{"ca.crt", slices.Concat(previous, r.CACert)},
			write{"ca.key", secrets.CAKey},
			write{"ca.crt", slices.Concat(r.CACert, previous)})
		if secrets.JoinSecret != "" {
			writes = append(writes, write{joinSecretFile, []byte(secrets.JoinSecret + "\n")})
		}
		if r.Phase == PhaseFinished {
			writes = append(writes, write{"ca.crt", r.CACert})
		}
	case r.Phase == PhaseFinished && p.previous() != nil:
		writes = append(writes, write{"ca.crt", r.CACert})
	default:
		return false, nil
	}
	for _, w := range writes {
		if err := datadir.WriteFileAtomic(p.path(w.file), w.data); err != nil {
			return false, err
		}
	}
	if err := dropSealKey(dir); err != nil {
		return false, err
	}
	return true, p.loadCA()
}

// openRotation is what r sealed for member: with its seal key, or, for a
// record of an earlier release, with the join secret.
func openRotation(dir datadir.Dir, r Rotation, member string, next *x509.Certificate) (RotationSecrets, error) {
	if r.Sealed != nil {
		return openSealed(dir, r, member, next)
	}
	keyPEM, err := openWithJoinSecret(dir, r.CAKey)
	if err != nil {
		return RotationSecrets{}, err
	}
	return RotationSecrets{CAKey: keyPEM}, keyMatches(keyPEM, next)
}

// PreviousCAClients are the users who authenticated with a client
// certificate of a CA other than the signing one since the start, and
// when last.
func (p *PKI) PreviousCAClients() map[string]time.Time { return p.clientCA.previousClients() }

// RememberPreviousCAClients adds the clients of the previous CA this
// member recorded before a restart, so that the finish still names them.
func (p *PKI) RememberPreviousCAClients(clients map[string]time.Time) {
	p.clientCA.remember(clients)
}

// PreviousCAClientsSeen receives once PreviousCAClients changed since the
// last receive: a member records them at once, so that a finish right
// after a client of the previous CA was seen names it.
func (p *PKI) PreviousCAClientsSeen() <-chan struct{} { return p.clientCA.seen }

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// pemCerts is the DER of each certificate of data.
func pemCerts(data []byte) [][]byte {
	var out [][]byte
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, b.Bytes)
		}
	}
}

// openWithJoinSecret opens the new CA's key of a rotation an earlier
// release began: AES-256-GCM with a key derived from the join secret.
func openWithJoinSecret(dir datadir.Dir, sealed []byte) ([]byte, error) {
	aead, err := joinSecretAEAD(dir)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("the rotation's CA key is truncated")
	}
	data, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], nil)
	if err != nil {
		return nil, errors.New("the rotation's CA key does not open with this gateway's join secret: is it of another site?")
	}
	return data, nil
}

func joinSecretAEAD(dir datadir.Dir) (cipher.AEAD, error) {
	secret, err := joinSecret(dir)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte("kubestore ca rotation\x00" + secret))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// CAOf is the signing CA of dir and, during a rotation, the previous one
// (nil otherwise).
func CAOf(dir datadir.Dir) (signing, previous *x509.Certificate, err error) {
	pki := dir.PKI()
	bundle, signing, _, err := readPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA: %w", err)
	}
	if ders := pemCerts(bundle); len(ders) > 1 {
		previous, err = x509.ParseCertificate(ders[1])
	}
	return signing, previous, err
}
