package access

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubestore/kubestore/datadir"
)

// The secrets of a rotation travel through etcd sealed for each member
// (RotationSecrets): the rotating command encrypts them with a key it
// agrees (X25519) with the seal key each member created for this rotation
// alone, when it saw the rotation being prepared. A copy of a member's
// pki/ taken before the rotation holds neither the CA's key nor any key
// that opens the new one's, and the join secret changes with the CA: the
// copy loses its power once the rotation is finished.

// sealKeyFile holds this member's private seal key for the rotation
// being prepared; it is removed once the member took the new CA.
const sealKeyFile = "rotation-seal.key"

// RotationSecrets are what a member receives sealed in a rotation's
// record: the new CA's key and the site's new join secret.
type RotationSecrets struct {
	CAKey      []byte `json:"caKey"`
	JoinSecret string `json:"joinSecret"`
}

// SealKey is the public half of dir's seal key for the rotation being
// prepared, created at its first use.
func SealKey(dir datadir.Dir) ([]byte, error) {
	k, err := sealPrivateKey(dir, true)
	if err != nil {
		return nil, err
	}
	return k.PublicKey().Bytes(), nil
}

func sealPrivateKey(dir datadir.Dir, create bool) (*ecdh.PrivateKey, error) {
	path := filepath.Join(dir.PKI(), sealKeyFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		b, _ := pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("%s holds no key", path)
		}
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if k, ok := k.(*ecdh.PrivateKey); ok {
			return k, nil
		}
		return nil, fmt.Errorf("%s holds no X25519 key", path)
	case !errors.Is(err, os.ErrNotExist) || !create:
		return nil, err
	}
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return k, datadir.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// dropSealKey removes dir's seal key once its rotation was taken.
func dropSealKey(dir datadir.Dir) error {
	err := os.Remove(filepath.Join(dir.PKI(), sealKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// sealFor seals s for each member's public seal key with a fresh
// ephemeral key (returned), bound to the new CA's certificate and the
// member's name.
func sealFor(members map[string][]byte, caCert []byte, s RotationSecrets) (ephemeral []byte, sealed map[string][]byte, err error) {
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	plain, err := json.Marshal(s)
	if err != nil {
		return nil, nil, err
	}
	sealed = map[string][]byte{}
	for member, pub := range members {
		peer, err := ecdh.X25519().NewPublicKey(pub)
		if err != nil {
			return nil, nil, fmt.Errorf("member %s's seal key: %w", member, err)
		}
		aead, err := sealAEAD(eph, peer, eph.PublicKey())
		if err != nil {
			return nil, nil, err
		}
		nonce := make([]byte, aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, nil, err
		}
		sealed[member] = aead.Seal(nonce, nonce, plain, sealAAD(caCert, member))
	}
	return eph.PublicKey().Bytes(), sealed, nil
}

// openSealed opens what r sealed for member with dir's seal key, and
// checks that the key is the new CA's.
func openSealed(dir datadir.Dir, r Rotation, member string, next *x509.Certificate) (RotationSecrets, error) {
	var s RotationSecrets
	sealed, ok := r.Sealed[member]
	if !ok {
		return s, fmt.Errorf("the rotation holds no secrets sealed for member %s: it was not a member when the rotation was prepared; remove it (kubestore member remove) and let it join again", member)
	}
	k, err := sealPrivateKey(dir, false)
	if err != nil {
		return s, fmt.Errorf("this member's seal key for the rotation: %w", err)
	}
	peer, err := ecdh.X25519().NewPublicKey(r.Ephemeral)
	if err != nil {
		return s, fmt.Errorf("the rotation's ephemeral key: %w", err)
	}
	aead, err := sealAEAD(k, peer, peer)
	if err != nil {
		return s, err
	}
	if len(sealed) < aead.NonceSize() {
		return s, errors.New("the rotation's sealed secrets are truncated")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], sealAAD(r.CACert, member))
	if err != nil {
		return s, errors.New("the rotation's secrets do not open with this member's seal key (was the rotation prepared again?)")
	}
	if err := json.Unmarshal(plain, &s); err != nil {
		return s, err
	}
	return s, keyMatches(s.CAKey, next)
}

// sealAEAD is AES-256-GCM under the X25519 agreement of own and peer,
// bound to the rotation's ephemeral public key.
func sealAEAD(own *ecdh.PrivateKey, peer, ephemeral *ecdh.PublicKey) (cipher.AEAD, error) {
	shared, err := own.ECDH(peer)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte("kubestore ca rotation seal\x00"))
	h.Write(shared)
	h.Write(ephemeral.Bytes())
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealAAD binds sealed secrets to the certificate they belong to and the
// member they are for: secrets moved to another record or member do not
// open.
func sealAAD(caCert []byte, member string) []byte {
	sum := sha256.Sum256(caCert)
	return append(sum[:], member...)
}

// keyMatches checks that keyPEM is the private key of cert.
func keyMatches(keyPEM []byte, cert *x509.Certificate) error {
	key, err := parseKey(keyPEM)
	if err != nil {
		return fmt.Errorf("the rotation's CA key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if !bytes.Equal(pub, cert.RawSubjectPublicKeyInfo) {
		return errors.New("the rotation's CA key is not the key of its certificate")
	}
	return nil
}
