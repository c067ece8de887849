// Command build writes one container image as an OCI image layout (see
// package ociimage); `make images` runs it for the manager and the agent.
//
//	go run ./internal/ociimage/build -binary bin/images/linux-amd64/fleet-manager \
//	    -entrypoint /fleet-manager -out bin/images/fleet-manager \
//	    -ref ghcr.io/gitfleet/fleet-manager:latest -label org.opencontainers.image.version=v0.1.0
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/fleet/internal/ociimage"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var o ociimage.Options
	var out, created string
	var refs, labels, extra list
	flag.StringVar(&o.Binary, "binary", "", "static binary to run (CGO_ENABLED=0)")
	flag.StringVar(&o.Entrypoint, "entrypoint", "", "path of the binary in the image, e.g. /fleet-manager")
	flag.Var(&extra, "extra-binary", "another static binary, put beside the entrypoint under its own name (repeatable)")
	flag.StringVar(&out, "out", "", "directory of the OCI image layout (replaced)")
	flag.Var(&refs, "ref", "name of the image in the layout's index.json (repeatable)")
	flag.Var(&labels, "label", "image label k=v (repeatable)")
	flag.StringVar(&o.OS, "os", "linux", "operating system of the binary")
	flag.StringVar(&o.Arch, "arch", "amd64", "architecture of the binary")
	flag.StringVar(&o.CACerts, "ca-certs", ociimage.DefaultCACerts, "CA bundle copied into the image")
	flag.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time in Unix seconds (default $SOURCE_DATE_EPOCH, else 0); fixed so rebuilds give the same digest")
	flag.Parse()
	o.Extra = extra
	if err := run(o, out, created, refs, labels); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

func run(o ociimage.Options, out, created string, refs, labels list) error {
	if out == "" {
		return fmt.Errorf("-out is required: the directory to write the image layout into")
	}
	secs := int64(0)
	if created != "" {
		var err error
		if secs, err = strconv.ParseInt(created, 10, 64); err != nil {
			return fmt.Errorf("-created (or SOURCE_DATE_EPOCH) %q is not a number of seconds since 1970", created)
		}
	}
	o.Created = time.Unix(secs, 0)
	o.Refs = refs
	o.Labels = map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q is not k=v", l)
		}
		o.Labels[k] = v
	}
	fmt.Fprintf(os.Stderr, "==> Writing %s (%s/%s) to %s\n", o.Entrypoint, o.OS, o.Arch, out)
	digest, err := ociimage.Build(out, o)
	if err != nil {
		return err
	}
	fmt.Println(digest)
	return nil
}
