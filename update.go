package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/maintenance"
	"github.com/kubestore/kubestore/server"
)

// updateCommands are the commands of an update's trial: commit it, or say
// where it stands.
func updateCommands() *cli.Command {
	return &cli.Command{
		Name:  "update",
		Usage: "the trial of an update to a newer release: commit it, or print its status",
		Subcommands: []*cli.Command{
			{
				Name:         "commit",
				Usage:        "commit the update of --data-dir (through the server when one runs on it): from then on the data may be of the new release's format, and an older release restores the pre-update snapshot to go back",
				Flags:        config.Flags(),
				Action:       updateCommit,
				OnUsageError: usageError,
			},
			{
				Name:         "status",
				Usage:        "print the data format of --data-dir, the release that last served it, and its last update (on trial or committed)",
				Flags:        config.Flags(),
				Action:       updateStatus,
				OnUsageError: usageError,
			},
		},
	}
}

func updateCommit(c *cli.Context) error {
	cc, err := loadConfigArgs(c)
	if err != nil {
		return err
	}
	return maintenance.UpdateCommit(c.Context, cc, server.BuildInfo().Version, c.App.Writer)
}

func updateStatus(c *cli.Context) error {
	cc, err := loadConfigArgs(c)
	if err != nil {
		return err
	}
	r, ok, err := datadir.Dir(cc.Config().DataDir).Record()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("--%s %s holds no data format record: no kubestore has served it yet", config.FlagDataDir, cc.Config().DataDir)
	}
	fmt.Fprintln(c.App.Writer, maintenance.Status(r))
	return nil
}
