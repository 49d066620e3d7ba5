package framework

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildOperator builds ./cmd/caliban-operator of the repository at root
// into dir and returns the binary's path.
func BuildOperator(root, dir string) (string, error) {
	path := filepath.Join(dir, "caliban-operator")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/caliban-operator")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/caliban-operator: %w\n%s", err, out)
	}
	return path, nil
}
