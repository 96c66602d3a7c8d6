package iallocator

import "github.com/leasehold/leasehold/pkg/allocator"

func processEvac(req *Request, opts allocator.Options) *Response {
	return failResp("request type " + req.Type + " is not implemented yet")
}
