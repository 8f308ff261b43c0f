package access

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCredentials asks the kernel who is at the other end of a unix
// socket connection.
func peerCredentials(c net.Conn) (peerCred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peerCred{}, fmt.Errorf("not a unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peerCred{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peerCred{}, err
	}
	if credErr != nil {
		return peerCred{}, credErr
	}
	return peerCred{uid: cred.Uid, gid: cred.Gid}, nil
}
