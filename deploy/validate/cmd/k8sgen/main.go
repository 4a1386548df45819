// Command k8sgen rewrites the generated Kubernetes manifests (see package k8sgen).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/flashsale/platform/deploy/validate"
	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

func main() {
	files, err := k8sgen.Files(validate.Root())
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sgen:", err)
		os.Exit(1)
	}
	for path, data := range files {
		if err := os.WriteFile(filepath.Join(validate.Root(), path), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "k8sgen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
