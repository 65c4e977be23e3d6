// Package arch holds no code; its test enforces the import graph (which
// internal package may import which, cmd/ included) so that layers keep
// pointing one way.
package arch
