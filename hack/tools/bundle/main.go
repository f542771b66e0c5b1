// Command bundle renders the operator's OLM bundle (bundle/ and
// bundle.Dockerfile) from the kustomize build of config/manifests.
//
// It is what `make bundle` runs; docs/install/olm.md describes what goes into the
// bundle and what is left out.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	o := OptionsFromEnv()
	channels := strings.Join(o.Channels, ",")
	flag.StringVar(&o.Root, "root", o.Root, "The repository root.")
	flag.StringVar(&o.Version, "version", o.Version, "The operator version, without a leading v ($BUNDLE_VERSION).")
	flag.StringVar(&o.Image, "image", o.Image, "The manager image; empty keeps the image config/manager names ($BUNDLE_IMG).")
	flag.StringVar(&channels, "channels", channels, "The channels the bundle is published to, comma-separated ($BUNDLE_CHANNELS).")
	flag.StringVar(&o.DefaultChannel, "default-channel", o.DefaultChannel, "The package's default channel ($BUNDLE_DEFAULT_CHANNEL).")
	flag.Parse()
	o.Channels = splitList(channels)

	b, err := Generate(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
	if err := b.Write(o.Root); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
	for _, l := range b.LeftOut {
		fmt.Fprintf(os.Stderr, "left out %s: %s\n", l.Object, l.Reason)
	}
	fmt.Fprintf(os.Stderr, "wrote %d files for %s\n", len(b.Files), b.CSVName)
}

// OptionsFromEnv reads the options the Makefile passes: BUNDLE_VERSION,
// BUNDLE_IMG, BUNDLE_CHANNELS and BUNDLE_DEFAULT_CHANNEL. The generator and
// the bundle check read the same variables, so they render the same bundle.
func OptionsFromEnv() Options {
	return Options{
		Root:           "../../..",
		Version:        os.Getenv("BUNDLE_VERSION"),
		Image:          os.Getenv("BUNDLE_IMG"),
		Channels:       splitList(os.Getenv("BUNDLE_CHANNELS")),
		DefaultChannel: os.Getenv("BUNDLE_DEFAULT_CHANNEL"),
	}
}

// splitList splits a comma-separated list and drops empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
