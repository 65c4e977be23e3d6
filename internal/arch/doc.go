// Package arch holds no code; its test enforces the import graph of
// DESIGN §3 so that layers keep pointing one way.
package arch
