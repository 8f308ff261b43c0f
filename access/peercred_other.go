//go:build !linux

package access

import (
	"errors"
	"net"
)

func peerCredentials(net.Conn) (peerCred, error) {
	return peerCred{}, errors.New("unix-socket peer credentials are only supported on Linux")
}
