package main

import (
	"fmt"
	"io"
	"os"

	"github.com/leasehold/leasehold/pkg/allocator/iallocator"
)

// iallocatorCmd answers a Ganeti IAllocator request from a file or stdin
// ("-"), printing hail's one-line JSON answer. Like hail, an unreadable
// request prints "Error: …" on stderr and exits 1, while a request that
// could not be satisfied is still a successful run whose answer says so.
func iallocatorCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: leasehold iallocator FILE|-")
		return 2
	}
	in := stdin
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintln(stderr, "Error:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	if err := iallocator.Run(in, stdout); err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}
