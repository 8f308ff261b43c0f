package access

import (
	"context"
	"net"
	"net/http"
	"os/user"
	"strconv"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	kuser "k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/klog/v2"
)

// UnixUserPrefix starts the user name of a unix-socket peer: unix:<login>,
// or unix:<uid> when the uid has no login. Root is the admin instead.
const UnixUserPrefix = "unix:"

// peerCred is the credentials of a unix-socket peer, as the kernel reports
// them (SO_PEERCRED) when it connects.
type peerCred struct{ uid, gid uint32 }

type peerCredKey struct{}

// PeerConnContext is the http.Server ConnContext of the unix socket: it
// records the peer's credentials in the connection's context, where the
// authenticator finds them.
func PeerConnContext(ctx context.Context, c net.Conn) context.Context {
	cred, err := peerCredentials(c)
	if err != nil {
		klog.ErrorS(err, "Reading the credentials of a unix-socket peer")
		return ctx
	}
	return context.WithValue(ctx, peerCredKey{}, cred)
}

// authenticatePeer authenticates a request that came through the unix
// socket by its peer's uid: root is the admin (it can read the admin
// kubeconfig anyway), anyone else unix:<login> in group unix-gid:<gid>.
var authenticatePeer = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
	cred, ok := req.Context().Value(peerCredKey{}).(peerCred)
	if !ok {
		return nil, false, nil
	}
	if cred.uid == 0 {
		return &authenticator.Response{User: &kuser.DefaultInfo{Name: AdminUser, Groups: []string{kuser.SystemPrivilegedGroup}}}, true, nil
	}
	name := strconv.FormatUint(uint64(cred.uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return &authenticator.Response{User: &kuser.DefaultInfo{
		Name:   UnixUserPrefix + name,
		UID:    strconv.FormatUint(uint64(cred.uid), 10),
		Groups: []string{"unix-gid:" + strconv.FormatUint(uint64(cred.gid), 10)},
	}}, true, nil
})
