// Command workload is the one program in the real-node tests' images
// (test/e2e/realnode_test.go): built static from this module, packed as an
// OCI image by the test and imported into containerd, so that no registry
// is needed. It is the pause container of every pod sandbox and each test
// container, by its first argument:
//
//	workload pause                 sleep until SIGTERM or SIGINT
//	workload serve PORT FILE...    print FILEs and $WORKLOAD_*, serve
//	                               /healthz (200 while every FILE reads) and
//	                               /files (their contents) on PORT
//	workload exit CODE AFTER       exit with CODE after the duration AFTER
//	workload cat CODE              copy stdin to stdout, then exit with
//	                               CODE (kubectl exec's streams and exit
//	                               code)
//	workload winsize               print its terminal's size ("size ROWS
//	                               COLS") at start and at each SIGWINCH;
//	                               exit when stdin says q (kubectl exec
//	                               -it's resizes)
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: workload pause | serve PORT FILE... | exit CODE AFTER | cat CODE | winsize")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch os.Args[1] {
	case "pause":
		<-stop
	case "serve":
		if len(os.Args) < 3 {
			fail("usage: workload serve PORT FILE...")
		}
		serve(os.Args[2], os.Args[3:], stop)
	case "exit":
		if len(os.Args) != 4 {
			fail("usage: workload exit CODE AFTER")
		}
		code, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fail("exit code: " + err.Error())
		}
		after, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fail("after: " + err.Error())
		}
		fmt.Printf("exiting with %d in %s\n", code, after)
		select {
		case <-time.After(after):
		case <-stop:
		}
		os.Exit(code)
	case "cat":
		if len(os.Args) != 3 {
			fail("usage: workload cat CODE")
		}
		code, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fail("exit code: " + err.Error())
		}
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fail(err.Error())
		}
		os.Exit(code)
	case "winsize":
		winsize()
	default:
		fail("unknown mode " + os.Args[1])
	}
}

// winsize prints the size of the terminal on stdin now and at each
// SIGWINCH, until it reads q.
func winsize() {
	resized := make(chan os.Signal, 1)
	signal.Notify(resized, syscall.SIGWINCH)
	quit := make(chan struct{})
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := os.Stdin.Read(b); err != nil || b[0] == 'q' {
				close(quit)
				return
			}
		}
	}()
	for {
		ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
		if err != nil {
			fail("the terminal's size: " + err.Error())
		}
		fmt.Printf("size %d %d\r\n", ws.Row, ws.Col)
		select {
		case <-resized:
		case <-quit:
			return
		}
	}
}

func serve(port string, files []string, stop chan os.Signal) {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WORKLOAD_") {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println("env", kv)
	}
	read := func() (string, error) {
		var b strings.Builder
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%s=%s\n", f, data)
		}
		return b.String(), nil
	}
	if out, err := read(); err != nil {
		fmt.Println("files:", err)
	} else {
		fmt.Print(out)
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := read(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/files", func(w http.ResponseWriter, _ *http.Request) {
		out, err := read()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, out)
	})
	srv := &http.Server{Addr: ":" + port, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-stop
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "workload:", msg)
	os.Exit(2)
}
