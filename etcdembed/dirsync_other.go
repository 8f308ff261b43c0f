//go:build !linux

package etcdembed

import (
	"go.uber.org/zap"

	"github.com/kubestore/kubestore/datadir"
)

// syncSnapDir needs inotify; elsewhere the member's directories are synced
// at start only.
func syncSnapDir(datadir.Dir, *zap.Logger, <-chan struct{}) (<-chan struct{}, error) {
	return nil, nil
}
