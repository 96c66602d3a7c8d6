package main

import (
	"errors"
	"io"
)

// runIAllocator is wired to pkg/allocator/iallocator once it lands.
func runIAllocator(in io.Reader, out io.Writer) error {
	return errors.New("iallocator: not built into this binary yet")
}
