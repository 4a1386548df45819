//go:build !race

package configcenter

const raceEnabled = false
