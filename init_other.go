//go:build !linux

package main

import "context"

func restartAsInit(context.Context) {}

// startAgain returns: off Linux the caller exits, and a supervisor starts
// kubestore again.
func startAgain() {}
