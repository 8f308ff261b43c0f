package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Site makes the embedded etcd one member of a site's cluster: several
// gateways whose members form one etcd cluster over mutual TLS (README: "A
// site of several gateways"). Without PeerAdvertiseAddress the member is
// alone and opens no TCP port for etcd.
type Site struct {
	// MemberName names this gateway's member in the site; empty is the
	// host name. It must be unique in the site.
	MemberName string `json:"memberName,omitempty"`
	// PeerAdvertiseAddress is the IP or DNS name the other members reach
	// this one at. Setting it makes the member a site's.
	PeerAdvertiseAddress string `json:"peerAdvertiseAddress,omitempty"`
	// PeerBindAddress and PeerPort are where the member listens for its
	// peers (etcd's raft traffic, mutual TLS).
	PeerBindAddress string `json:"peerBindAddress"`
	PeerPort        int    `json:"peerPort"`
	// Join is the https:// URL of a member's API; with JoinToken, a member
	// with no etcd data joins that member's site instead of starting one.
	Join      string `json:"join,omitempty"`
	JoinToken string `json:"joinToken,omitempty"`
}

// Site defaults: etcd's peer port, on every interface, since peers are
// other machines.
const (
	DefaultPeerBindAddress = "0.0.0.0"
	DefaultPeerPort        = 2380
	// DefaultHeartbeatInterval and DefaultElectionTimeout are etcd's
	// defaults, measured on a site of three (docs/PERFORMANCE.md, "A site
	// of several gateways"): a LAN's round trip is far below the
	// heartbeat, and a leader that dies is replaced within about twice the
	// election timeout.
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultElectionTimeout   = time.Second
)

// SiteMemberCommonName is the subject of every member's peer certificate,
// and the only one the etcd peer port admits (AllowedCNs), dialling or
// dialled: the members alone on the raft port. The site's CA signs other
// certificates (serving, the admin's, every one the CSR signer issues for
// kubelets and users), and the CSR signer never issues this name.
const SiteMemberCommonName = "kubestore:site-member"

// Enabled reports whether the member is a site's.
func (s Site) Enabled() bool { return s.PeerAdvertiseAddress != "" }

// Name is the member's name: MemberName, else the host name.
func (s Site) Name() string {
	if s.MemberName != "" {
		return s.MemberName
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return strings.ToLower(h)
	}
	return "kubestore"
}

// PeerURL is the URL the other members reach this one at.
func (s Site) PeerURL() string {
	return "https://" + net.JoinHostPort(s.PeerAdvertiseAddress, fmt.Sprint(s.PeerPort))
}

// JoinTokenPrefix starts every join token, as k3s's secure tokens do:
// K10, the SHA-256 of the site CA's certificate (DER) in hex, "::" and the
// site's join secret.
const JoinTokenPrefix = "K10"

// JoinToken is a parsed join token.
type JoinToken struct {
	// CAHash is the SHA-256 of the site CA's certificate, in DER.
	CAHash [sha256.Size]byte
	Secret string
}

// FormatJoinToken is the token of the site whose CA certificate is caDER.
func FormatJoinToken(caDER []byte, secret string) string {
	sum := sha256.Sum256(caDER)
	return JoinTokenPrefix + hex.EncodeToString(sum[:]) + "::" + secret
}

// ParseJoinToken parses a token FormatJoinToken made.
func ParseJoinToken(s string) (JoinToken, error) {
	var t JoinToken
	hash, secret, ok := strings.Cut(strings.TrimPrefix(s, JoinTokenPrefix), "::")
	if !strings.HasPrefix(s, JoinTokenPrefix) || !ok {
		return t, fmt.Errorf("must be %s<sha256 of the site CA>::<secret>, as kubestore member token prints", JoinTokenPrefix)
	}
	if b, err := hex.DecodeString(hash); err != nil || len(b) != sha256.Size {
		return t, fmt.Errorf("the CA hash after %s must be %d hex digits", JoinTokenPrefix, 2*sha256.Size)
	} else {
		copy(t.CAHash[:], b)
	}
	if len(secret) < 16 {
		return t, fmt.Errorf("the secret after :: must be at least 16 characters")
	}
	t.Secret = secret
	return t, nil
}

func (s Site) validate(e Etcd, srv Server) []error {
	var errs []error
	if s.MemberName != "" {
		if msgs := validation.IsDNS1123Label(s.MemberName); len(msgs) > 0 {
			errs = append(errs, invalid(FlagMemberName, s.MemberName, strings.Join(msgs, "; ")))
		}
	}
	if ip := net.ParseIP(s.PeerBindAddress); ip == nil {
		errs = append(errs, invalid(FlagPeerBindAddress, s.PeerBindAddress, "must be an IP address"))
	}
	if s.PeerPort < 1 || s.PeerPort > 65535 {
		errs = append(errs, invalid(FlagPeerPort, s.PeerPort, "must be between 1 and 65535 (the other members dial it)"))
	} else if s.Enabled() && s.PeerPort == srv.SecurePort {
		errs = append(errs, invalid(FlagPeerPort, s.PeerPort, "must not be --"+FlagSecurePort))
	}
	if a := s.PeerAdvertiseAddress; a != "" {
		ip := net.ParseIP(a)
		switch {
		case ip != nil && (ip.IsUnspecified() || ip.IsMulticast()):
			errs = append(errs, invalid(FlagPeerAdvertiseAddress, a, "must be an address the other members can reach, not "+ip.String()))
		case ip == nil && len(validation.IsDNS1123Subdomain(a)) > 0:
			errs = append(errs, invalid(FlagPeerAdvertiseAddress, a, "must be an IP address or a DNS name"))
		}
		if e.External() {
			errs = append(errs, invalid(FlagPeerAdvertiseAddress, a, "is for the embedded etcd; with --etcd-servers the external cluster is the site"))
		}
	}
	if s.Join != "" {
		u, err := url.Parse(s.Join)
		switch {
		case err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/"):
			errs = append(errs, invalid(FlagJoin, s.Join, "must be https://HOST:PORT, the API of a member of the site"))
		case !s.Enabled():
			errs = append(errs, invalid(FlagJoin, s.Join, "needs --"+FlagPeerAdvertiseAddress+", the address the site's members reach this one at"))
		}
		if s.JoinToken == "" {
			errs = append(errs, invalid(FlagJoin, s.Join, "needs --"+FlagJoinToken+" (kubestore member token prints it on a member)"))
		}
	}
	if s.JoinToken != "" {
		if _, err := ParseJoinToken(s.JoinToken); err != nil {
			// The value is a secret: the message names the flag only.
			errs = append(errs, fmt.Errorf("invalid --%s: %w", FlagJoinToken, err))
		} else if s.Join == "" {
			errs = append(errs, fmt.Errorf("invalid --%s: is only used with --%s", FlagJoinToken, FlagJoin))
		}
	}
	return errs
}

func (e Etcd) validateRaftTimes() []error {
	hb, el := e.HeartbeatInterval.Duration, e.ElectionTimeout.Duration
	errs := []error{positive(FlagEtcdHeartbeatInterval, hb), positive(FlagEtcdElectionTimeout, el)}
	if hb > 0 && hb%time.Millisecond != 0 {
		errs = append(errs, invalid(FlagEtcdHeartbeatInterval, e.HeartbeatInterval, "must be whole milliseconds"))
	}
	if el > 0 && el%time.Millisecond != 0 {
		errs = append(errs, invalid(FlagEtcdElectionTimeout, e.ElectionTimeout, "must be whole milliseconds"))
	}
	// etcd's own limits (embed.Config.Validate).
	if hb > 0 && el > 0 && el < 5*hb {
		errs = append(errs, invalid(FlagEtcdElectionTimeout, e.ElectionTimeout, fmt.Sprintf("must be at least 5 times --%s %s", FlagEtcdHeartbeatInterval, e.HeartbeatInterval)))
	}
	if el > 50*time.Second {
		errs = append(errs, invalid(FlagEtcdElectionTimeout, e.ElectionTimeout, "must be at most 50s"))
	}
	return errs
}
