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
// instead of relying on the wrap. A 64-bit system keeps etcd's default.
func LimitMmap(quota config.ByteSize) {
	if strconv.IntSize == 32 && quota > 0 {
		backend.InitialMmapSize = mmapSize(quota)
	}
}

// mmapSize is the map etcd's server uses for a quota: 10% over it, so that
// a database just past its quota can still be opened to disarm the alarm.
func mmapSize(quota config.ByteSize) uint64 {
	return uint64(quota) + uint64(quota)/10
}
