package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/maintenance"
	"github.com/kubestore/kubestore/server"
)

// flagRevisionBump is snapshot restore's --bump-revision.
const flagRevisionBump = "bump-revision"

// operatorCommands are the operator's commands: etcd maintenance and
// configuration files.
func operatorCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:         "defrag",
			Usage:        "defragment etcd to reclaim space, online if a server runs on --data-dir; under etcd's NOSPACE alarm it compacts first and disarms the alarm once below the quota",
			Flags:        config.Flags(),
			Action:       defrag,
			OnUsageError: usageError,
		},
		{
			Name:  "snapshot",
			Usage: "save or restore a snapshot of etcd",
			Subcommands: []*cli.Command{
				{
					Name:         "save",
					Usage:        "write a consistent snapshot of etcd to FILE, from the running server or a stopped data directory",
					ArgsUsage:    "FILE",
					Flags:        config.Flags(),
					Action:       snapshotSave,
					OnUsageError: usageError,
				},
				{
					Name:      "restore",
					Usage:     "create the etcd of a fresh --data-dir from snapshot FILE (offline), then serve it",
					ArgsUsage: "FILE",
					Flags: append(config.Flags(), &cli.Uint64Flag{
						Name:  flagRevisionBump,
						Usage: "raise etcd's revision, and so every resourceVersion, by this much, so they keep increasing past the old server's; 0 keeps them",
						Value: maintenance.DefaultRevisionBump,
					}),
					Action:       snapshotRestore,
					OnUsageError: usageError,
				},
			},
		},
		updateCommands(),
		{
			Name:  "cluster",
			Usage: "recover this gateway's site",
			Subcommands: []*cli.Command{
				{
					Name:         "reset",
					Usage:        "after the site lost quorum for good: make this stopped member the only member of its site, with all its data (copied first to a new <data-dir>/etcd.before-reset.<time>); the other gateways then join it again by themselves",
					Flags:        config.Flags(),
					Action:       clusterReset,
					OnUsageError: usageError,
				},
			},
		},
		{
			Name:  "member",
			Usage: "the members of this gateway's site (several gateways' embedded etcd members as one cluster; README: \"A site of several gateways\")",
			Subcommands: []*cli.Command{
				{
					Name:         "list",
					Usage:        "list the site's members: name, id, peer URL, role, and whether this gateway reaches each one",
					Flags:        config.Flags(),
					Action:       memberList,
					OnUsageError: usageError,
				},
				{
					Name:         "remove",
					Usage:        "remove member NAME from the site, running or down; etcd refuses if the site would lose quorum",
					ArgsUsage:    "NAME",
					Flags:        config.Flags(),
					Action:       memberRemove,
					OnUsageError: usageError,
				},
				{
					Name:         "token",
					Usage:        "print the join token another gateway joins this one's site with (--join-token)",
					Flags:        config.Flags(),
					Action:       memberToken,
					OnUsageError: usageError,
				},
			},
		},
		{
			Name:  "ca",
			Usage: "the certificate authority of this gateway or site: its expiry, and its rotation (README: \"The CA and its rotation\")",
			Subcommands: []*cli.Command{
				{
					Name:         "status",
					Usage:        "print the CA's name and expiry, and where each member stands in a rotation under way",
					Flags:        config.Flags(),
					Action:       caStatus,
					OnUsageError: usageError,
				},
				{
					Name:         "rotate",
					Usage:        "begin a rotation: a new CA, certified by the current one, signs from now on; both are trusted until ca finish",
					Flags:        config.Flags(),
					Action:       caRotate,
					OnUsageError: usageError,
				},
				{
					Name:  "finish",
					Usage: "end the rotation: only the new CA is trusted; refused while a member has not taken it or clients use certificates of the previous one (unless --force)",
					Flags: append(config.Flags(), &cli.BoolFlag{Name: "force",
						Usage: "finish although clients still authenticate with certificates of the previous CA (they are refused from then on)"}),
					Action:       caFinish,
					OnUsageError: usageError,
				},
			},
		},
		{
			Name:  "config",
			Usage: "print or check configuration files",
			Subcommands: []*cli.Command{
				{
					Name:         "defaults",
					Usage:        "print the effective configuration (the defaults, with any flag or KUBESTORE_* variable given) as YAML that --config accepts",
					Flags:        config.Flags(),
					Action:       configDefaults,
					OnUsageError: usageError,
				},
				{
					Name:         "check",
					Usage:        "validate --config FILE (with any flag or KUBESTORE_* variable given) without starting anything; one line per problem",
					Flags:        config.Flags(),
					Action:       configCheck,
					OnUsageError: usageError,
				},
			},
		},
	}
}

func configDefaults(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	data, err := cc.Config().YAML()
	if err != nil {
		return err
	}
	_, err = c.App.Writer.Write(data)
	return err
}

func configCheck(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	path := ""
	for _, lc := range c.Lineage() {
		if lc.IsSet(config.FlagConfig) {
			path = lc.String(config.FlagConfig)
			break
		}
	}
	if path == "" {
		return fmt.Errorf("kubestore config check needs --%s FILE", config.FlagConfig)
	}
	if _, err := loadConfigArgs(c); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s: ok\n", path)
	return nil
}

// oneArg returns the single positional argument of a command. Flags may
// follow it, as etcdutl takes them (kubestore snapshot restore FILE
// --data-dir DIR): urfave/cli v2 stops parsing flags at the first
// positional argument, so the ones after it are set here.
func oneArg(c *cli.Context, what string) (string, error) {
	args := c.Args().Slice()
	if len(args) == 0 {
		return "", fmt.Errorf("%s needs exactly one argument, %s, and got none", commandPath(c), what)
	}
	if err := setTrailingFlags(c, args[1:], what); err != nil {
		return "", err
	}
	return args[0], nil
}

// setTrailingFlags sets the flags in args, which follow a command's
// positional argument, as if they had come before it.
func setTrailingFlags(c *cli.Context, args []string, what string) error {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || name == "" {
			return fmt.Errorf("%s needs exactly one argument, %s; unexpected %q", commandPath(c), what, arg)
		}
		f := commandFlag(c.Command, name)
		if f == nil {
			return fmt.Errorf("flag provided but not defined: -%s", name)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 == len(args) {
				return fmt.Errorf("flag needs an argument: -%s", name)
			}
			i++
			value = args[i]
		}
		if err := c.Set(name, value); err != nil {
			return fmt.Errorf("invalid value %q for flag -%s: %v", value, name, err)
		}
	}
	return nil
}

// commandPath is the command's name with its parents', "snapshot restore"
// (cli.Command.FullName gives only the last for a subcommand).
func commandPath(c *cli.Context) string {
	var names []string
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.Command.Name != "" {
			names = append([]string{ctx.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

// commandFlag is the flag of cmd with the given name or alias.
func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func defrag(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.Defrag(c.Context, cc, server.BuildInfo().Version, c.App.Writer)
}

func snapshotSave(c *cli.Context) error {
	file, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	cc, err := loadConfigArgs(c)
	if err != nil {
		return err
	}
	return maintenance.SnapshotSave(c.Context, cc, file, server.BuildInfo().Version, c.App.Writer)
}

func snapshotRestore(c *cli.Context) error {
	file, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	cc, err := loadConfigArgs(c)
	if err != nil {
		return err
	}
	return maintenance.SnapshotRestore(c.Context, cc, file, c.Uint64(flagRevisionBump), server.BuildInfo().Version, c.App.Writer)
}

func memberList(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.MemberList(c.Context, cc, server.BuildInfo().Version, c.App.Writer)
}

func memberRemove(c *cli.Context) error {
	name, err := oneArg(c, "NAME")
	if err != nil {
		return err
	}
	cc, err := loadConfigArgs(c)
	if err != nil {
		return err
	}
	return maintenance.MemberRemove(c.Context, cc, name, server.BuildInfo().Version, c.App.Writer)
}

func memberToken(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.MemberToken(cc, c.App.Writer)
}

func clusterReset(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.ClusterReset(c.Context, cc, server.BuildInfo().Version, c.App.Writer)
}

func caStatus(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.CAStatus(c.Context, cc, server.BuildInfo().Version, c.App.Writer)
}

func caRotate(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.CARotate(c.Context, cc, server.BuildInfo().Version, c.App.Writer)
}

func caFinish(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	return maintenance.CAFinish(c.Context, cc, c.Bool("force"), server.BuildInfo().Version, c.App.Writer)
}
