package etcdembed

import (
	"strconv"

	"go.etcd.io/etcd/server/v3/storage/backend"

	"github.com/kubestore/kubestore/config"
)

// LimitMmap makes every bbolt database this process opens map at most what
// the quota allows, on a 32-bit system.
//
// bbolt maps the whole database file into the address space. The etcd
// server maps quota × 1.1 when the quota is not etcd's default
// (storage/backend.go), which the 32-bit default quota never is. Anything
// else that opens a database with backend.NewDefaultBackend (snapshot
// restore's revision bump, in etcdutl) maps backend.InitialMmapSize,
// 10 GiB: on 32-bit that only works because the conversion to int wraps
// negative and bbolt then ignores it. Set it to what the server maps
// instead of relying on the wrap: 10% over the quota, so that a database
// just past it can still be opened to disarm the alarm. A 64-bit system
// keeps etcd's default.
func LimitMmap(quota config.ByteSize) {
	if strconv.IntSize == 32 && quota > 0 {
		backend.InitialMmapSize = uint64(quota) + uint64(quota)/10
	}
}
