/**
 * Custom search attributes on every vmplane workflow, so the Temporal Web UI and
 * `temporal workflow list --query` can find, say, every instance stuck in `stopping`.
 * The dev server registers them at start (`--search-attribute NAME=Keyword`); a production
 * cluster needs `temporal operator search-attribute create` once.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common'

export const InstanceIdKey = defineSearchAttributeKey('InstanceId', SearchAttributeType.KEYWORD)
export const InstanceStateKey = defineSearchAttributeKey('InstanceState', SearchAttributeType.KEYWORD)
export const HostIdKey = defineSearchAttributeKey('HostId', SearchAttributeType.KEYWORD)
export const OperationKey = defineSearchAttributeKey('Operation', SearchAttributeType.KEYWORD)
/** The ID of the project that owns the instance (docs/design.md §18). */
export const ProjectKey = defineSearchAttributeKey('Project', SearchAttributeType.KEYWORD)

export const SEARCH_ATTRIBUTE_KEYS = [InstanceIdKey, InstanceStateKey, HostIdKey, OperationKey, ProjectKey]
