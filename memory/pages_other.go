//go:build !linux

package memory

// releaseStartupPages is Linux-only.
func releaseStartupPages() (int64, error) { return 0, nil }
