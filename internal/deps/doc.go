// Package deps holds the tests that keep agentry's shape: its
// dependency graph as its architecture draws it (arrows point down only,
// and a program that builds agents links no wire protocol it does not
// name), its files and functions small, and its documentation's links
// inside the repository and alive.
package deps
