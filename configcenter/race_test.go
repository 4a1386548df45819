//go:build race

package configcenter

const raceEnabled = true
