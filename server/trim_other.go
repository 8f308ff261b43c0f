//go:build !linux

package server

// releaseStartupPages is Linux-only.
func releaseStartupPages() (int64, error) { return 0, nil }
