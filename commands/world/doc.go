// Package world composes what each node would be sent from the read
// models: it gathers composition's input (active nodes, their assignments,
// the manifests those name, secret settings opened) from one consistent
// view, hands it to package compose, and caches the result by the read
// models' composition version, so status and push on a busy mesh read
// digests instead of composing again. Push, plan, status, rollouts and
// seats all read through a *Composer; none gathers input itself.
package world
