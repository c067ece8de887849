package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The test binary's own pages: its code runs, so some of .text is resident,
// and never more than the section holds.
func TestFilePagesOfThisProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := filePages(os.Getpid(), exe)
	m := regexp.MustCompile(`\.text ([0-9.]+) of ([0-9.]+) MB \((\d+) of (\d+) 64K windows\)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no .text figure in %q", got)
	}
	res, _ := strconv.ParseFloat(m[1], 64)
	size, _ := strconv.ParseFloat(m[2], 64)
	touched, _ := strconv.Atoi(m[3])
	windows, _ := strconv.Atoi(m[4])
	if res <= 0 || res > size || touched <= 0 || touched > windows {
		t.Fatalf("implausible .text figures in %q", got)
	}
}
