//go:build !linux

package main

import "context"

func restartAsInit(context.Context) {}
