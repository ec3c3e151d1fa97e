-- Argo CD health of a polychrome.dev Conversation, from the conditions the operator writes
-- (docs/argocd.md says what each health means). Scripts set in argocd-cm get only Lua's base,
-- table and package libraries, so this uses no string, math, os or io function (and no
-- string methods such as s:find, which need the string library too).
local hs = {}

local function text(value)
  if value == nil then
    return ""
  end
  return tostring(value)
end

local function condition(conditionType)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

-- "Reason: message", the way the operator's conditions read in kubectl.
local function describe(c)
  if c.message == nil or c.message == "" then
    return text(c.reason)
  end
  return text(c.reason) .. ": " .. text(c.message)
end

local function result(status, message)
  hs.status = status
  hs.message = message
  return hs
end

local ready = condition("Ready")
local progressing = condition("Progressing")
local degraded = condition("Degraded")

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  if ready ~= nil and ready.reason == "Terminating" then
    return result("Progressing", describe(ready))
  end
  return result("Progressing", "Terminating: the Conversation is being deleted")
end

if ready == nil and progressing == nil and degraded == nil then
  return result("Progressing", "waiting for the operator to report the Conversation's status")
end

-- A spec change the operator has not reconciled yet: status.observedGeneration moves only
-- after a pass in which every action succeeded; each condition carries the generation it
-- describes, even after a failed pass.
local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end
local observed = obj.status.observedGeneration
local reconciled = generation == nil or (observed ~= nil and observed >= generation)

if degraded ~= nil and degraded.status == "True" then
  local current = generation == nil
    or (degraded.observedGeneration ~= nil and degraded.observedGeneration >= generation)
  if reconciled or current then
    return result("Degraded", describe(degraded))
  end
end

if not reconciled then
  local last = "none yet"
  if observed ~= nil then
    last = text(observed)
  end
  return result(
    "Progressing",
    "waiting for the operator to reconcile generation " .. text(generation) .. " (last reconciled: " .. last .. ")"
  )
end

if progressing ~= nil and progressing.status == "True" then
  -- A turn that waits for a person is paused, not progressing: it resumes on an approval or
  -- an answer, however long that takes.
  if progressing.reason == "AwaitingApproval" or progressing.reason == "AwaitingAnswer" then
    return result("Suspended", describe(progressing))
  end
  return result("Progressing", describe(progressing))
end

if ready ~= nil and ready.status == "True" then
  return result("Healthy", describe(ready))
end

if ready ~= nil and ready.reason == "Closed" then
  return result("Suspended", describe(ready))
end

if ready ~= nil then
  return result("Progressing", describe(ready))
end
return result("Progressing", "waiting for the operator to report the Conversation's Ready condition")
