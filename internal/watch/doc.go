// Package watch owns the operator's watch runtime: the kinds a hub may not
// serve, whose controllers it turns on and off as their CRDs come and go,
// without a restart; the metadata-only watches added at run time on the
// resources policies name (ResourceWatches); and the cache's indexes. It
// decides nothing about clusters or policies and writes nothing.
package watch
