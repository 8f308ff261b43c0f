// Command testsummary reads `go test -json` on stdin, prints each line of
// output as `go test -v` would, and ends with what a reader of a long run
// needs first: for each failed test, the lines the test itself logged
// (its t.Errorf, t.Fatalf and t.Logf, in order), without the process logs
// it dumps when it fails. A CI log that shows only its last lines then
// shows why. It exits 1 when a test or a package failed, or when the
// stream ended without a package's result.
//
//	go test -json ./test/e2e | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of test2json (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// ownLine is a line a test logged: four spaces (more in a subtest), then
// file.go:line: and the message. The process logs the tests dump are
// logged by proc_test.go, their lines indented further.
var ownLine = regexp.MustCompile(`^\s{4,}[\w.-]+\.go:\d+: `)

// continued is a further line of a message: go test indents it by four
// more spaces.
var continued = regexp.MustCompile(`^\s{8,}\S`)

func main() {
	os.Exit(summarize(os.Stdin, os.Stdout))
}

func summarize(in io.Reader, out io.Writer) int {
	lines := map[string][]string{} // by package and test
	own := map[string]bool{}       // whether the test's last line was its own message's
	var failed []string
	packagesDone, packagesFailed := 0, 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// go test prints build failures as plain text.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			fmt.Fprint(out, e.Output)
			switch {
			case e.Test == "":
			case ownLine.MatchString(e.Output):
				// A message of the test's own, or a process log's start.
				own[key] = !strings.Contains(e.Output, "proc_test.go:")
				if own[key] {
					lines[key] = append(lines[key], strings.TrimRight(e.Output, "\n"))
				}
			case own[key] && continued.MatchString(e.Output):
				// The next lines of a message of several.
				lines[key] = append(lines[key], strings.TrimRight(e.Output, "\n"))
			default:
				own[key] = false
			}
		case "fail":
			if e.Test == "" {
				packagesDone++
				packagesFailed++
			} else {
				failed = append(failed, key)
			}
		case "pass", "skip":
			if e.Test == "" {
				packagesDone++
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testsummary: reading go test -json: %v\n", err)
		return 1
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "\n%d failed tests, what each logged (its processes' logs are above):\n", len(failed))
		for _, key := range failed {
			fmt.Fprintf(out, "--- FAIL: %s\n", key)
			for _, l := range lines[key] {
				fmt.Fprintln(out, l)
			}
		}
	}
	switch {
	case packagesFailed > 0 || len(failed) > 0:
		return 1
	case packagesDone == 0:
		fmt.Fprintln(out, "testsummary: no package's result in the stream")
		return 1
	}
	return 0
}
