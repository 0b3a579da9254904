package tool

import "reflect"

func typeOfSample() reflect.Type { return reflect.TypeFor[sample]() }
