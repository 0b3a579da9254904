// Package deps holds the test that keeps agentry's dependency graph as
// its architecture draws it: arrows point down only, and a program that
// builds agents links no wire protocol it does not name.
package deps
