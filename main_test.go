package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kubestore/kubestore/server"
)

// A restart the server asked for starts kubestore again, unless a signal
// came meanwhile: then the stop is the one the signal asked for, and it
// is clean. An error of its own exits with it.
func TestAfterRun(t *testing.T) {
	failed := errors.New("binding the port")
	for _, c := range []struct {
		err         error
		signalled   bool
		wantRestart bool
		wantExit    error
	}{
		{server.ErrRestart, false, true, server.ErrRestart},
		{fmt.Errorf("site: %w", server.ErrRestart), false, true, server.ErrRestart},
		{server.ErrRestart, true, false, nil},
		{context.Canceled, true, false, nil},
		{nil, true, false, nil},
		{nil, false, false, nil},
		{failed, false, false, failed},
		{failed, true, false, failed},
	} {
		restart, exit := afterRun(c.err, c.signalled)
		if restart != c.wantRestart || !errors.Is(exit, c.wantExit) || (c.wantExit == nil) != (exit == nil) {
			t.Errorf("afterRun(%v, signalled %t) = %t, %v; want %t, %v", c.err, c.signalled, restart, exit, c.wantRestart, c.wantExit)
		}
	}
}
