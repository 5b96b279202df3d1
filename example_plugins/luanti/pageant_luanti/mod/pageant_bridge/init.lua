-- pageant_bridge: the game's end of pageant's game link (Luanti 5.6).
--
-- One sync is kept open with the host (POST /api/v1/link/{server}/sync). Each command is run
-- at most once per (command, key): its answer is remembered in mod storage and a repeat is
-- answered from there. Happenings wait in an outbox in mod storage until a sync is answered,
-- so a restart of the game or of pageant loses none, and their ids make a resent one count
-- once. A lease's `until` is kept too: past it, the mod puts the value back by itself.

local http = minetest.request_http_api()
local storage = minetest.get_mod_storage()
local conf = minetest.settings
local MOD = "pageant_bridge"

local URL = conf:get(MOD .. ".url")
local SERVER = conf:get(MOD .. ".server")
local TOKEN = conf:get(MOD .. ".token")
local WAIT = tonumber(conf:get(MOD .. ".wait") or "10")
local TESTS = conf:get_bool(MOD .. ".test_commands", false)
-- What one sync carries at most; the rest goes in the next, at once.
local BATCH = 200
-- How long a command's remembered answer is kept (seconds): far past any retry.
local KEEP = 86400
-- The settings a lease may borrow; gravity is every player's physics override.
local LEASABLE = {time_speed = true, gravity = true}
-- A test world also lends `pageant contract-check --live-link` its own target: a scratch
-- setting of that name, so the check's lease walk reads and writes this world.
if TESTS then LEASABLE["contract-check"] = true end

-- ── storage: JSON values under fixed names ─────────────────────────────────

local function load(name, default)
	local raw = storage:get_string(name)
	if raw == "" then return default end
	return minetest.parse_json(raw) or default
end

local done = load("done", {})        -- "command/key" -> {r = result, t = time}
local results = load("results", {}) -- answers not yet acknowledged by a sync
local outbox = load("outbox", {})   -- happenings not yet acknowledged
local retired = load("retired", {}) -- entity id -> true: removed by a revert
local leases = load("leases", {})   -- setting -> {value, baseline, until}
local spots = load("spots", {})     -- entity id -> where it was spawned (its block forceloaded)
local world = storage:get_string("world")
if world == "" then
	world = string.format("%08x%08x", math.random(0, 0x7fffffff), os.time())
	storage:set_string("world", world)
end

local function save(name, value)
	storage:set_string(name, minetest.write_json(value))
end

-- Lua's JSON writes every number as a double ("5.0"); pageant's triggers type coordinates as
-- integers, so the bodies are written here: a whole number as an integer, always.
local OBJECT = {} -- the metatable that makes an empty table "{}", not "[]"
local function encode(v)
	local t = type(v)
	if t == "table" then
		if next(v) == nil then return (getmetatable(v) == OBJECT) and "{}" or "[]" end
		if v[1] ~= nil or #v > 0 then
			local out = {}
			for _, item in ipairs(v) do out[#out + 1] = encode(item) end
			return "[" .. table.concat(out, ",") .. "]"
		end
		local out = {}
		for k, item in pairs(v) do out[#out + 1] = encode(tostring(k)) .. ":" .. encode(item) end
		return "{" .. table.concat(out, ",") .. "}"
	elseif t == "number" then
		if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
		return string.format("%.17g", v)
	elseif t == "boolean" then
		return tostring(v)
	elseif v == nil then
		return "null"
	end
	return minetest.write_json(tostring(v))
end

-- ── happenings ─────────────────────────────────────────────────────────────

local sync_now -- set below

local function happen(trigger, payload)
	local n = storage:get_int("counter") + 1
	storage:set_int("counter", n)
	outbox[#outbox + 1] = {trigger = trigger, payload = payload, id = world .. "-" .. n}
	save("outbox", outbox)
	sync_now()
end

minetest.register_on_joinplayer(function(player)
	local gravity = leases.gravity and tonumber(leases.gravity.value)
	if gravity then player:set_physics_override({gravity = gravity}) end
	happen("luanti.player.joined", {player = player:get_player_name()})
end)

minetest.register_on_dieplayer(function(player)
	happen("luanti.player.died", {player = player:get_player_name()})
end)

minetest.register_on_chat_message(function(name, message)
	happen("luanti.chat", {player = name, message = message})
end)

minetest.register_on_dignode(function(pos, oldnode, digger)
	happen("luanti.node.dug", {
		node = oldnode.name, x = pos.x, y = pos.y, z = pos.z,
		player = digger and digger:is_player() and digger:get_player_name() or "",
	})
end)

-- ── the entities: a beacon and a guardian ───────────────────────────────────
-- Each keeps its block loaded (a persistent forceload) from its spawn to its revert or its
-- death, so it stays among the world's loaded entities with no player near: what the
-- reconcile walks. One reverted while its block was unloaded anyway removes itself when the
-- block loads again (the retired set, checked in on_activate).

local dead = {} -- entity id -> true: died since the world started (its on_death ran)

local function release(id)
	if spots[id] then
		minetest.forceload_free_block(spots[id])
		spots[id] = nil
		save("spots", spots)
	end
end

local function name_of(object)
	if object and object:is_player() then return object:get_player_name() end
	local entity = object and object:get_luaentity()
	return entity and entity.name or ""
end

local function register(kind, texture, hp)
	minetest.register_entity(MOD .. ":" .. kind, {
		initial_properties = {
			visual = "cube", textures = {texture, texture, texture, texture, texture, texture},
			physical = true, collisionbox = {-0.5, -0.5, -0.5, 0.5, 0.5, 0.5},
			hp_max = hp, static_save = true, glow = 14,
		},
		on_activate = function(self, staticdata)
			self.id = staticdata
			-- Reverted while its block was unloaded: it goes as soon as it is back.
			if retired[self.id] then self.object:remove() return end
			self.object:set_armor_groups({fleshy = 100})
		end,
		get_staticdata = function(self) return self.id or "" end,
		on_death = function(self, killer)
			dead[self.id or ""] = true
			release(self.id)
			happen("luanti.entity.killed", {entity = kind, id = self.id or "", killer = name_of(killer)})
		end,
	})
end
register("beacon", "default_mese_block.png", 20)
register("guardian", "default_obsidian.png", 40)

local function present()
	local found = {}
	for _, entity in pairs(minetest.luaentities) do
		if entity.id and entity.name:sub(1, #MOD + 1) == MOD .. ":" then
			local pos = entity.object:get_pos()
			if pos then found[#found + 1] = {id = entity.id, kind = entity.name:sub(#MOD + 2)} end
		end
	end
	return found
end

-- ── the commands ───────────────────────────────────────────────────────────

local function at(p)
	local pos = {x = tonumber(p.x), y = tonumber(p.y), z = tonumber(p.z)}
	assert(pos.x and pos.y and pos.z, "x, y and z must be numbers")
	minetest.load_area(pos)
	return pos
end

local function chest(p, make)
	local pos = at(p)
	if make and minetest.get_node(pos).name ~= "default:chest" then
		minetest.set_node(pos, {name = "default:chest"})
	end
	local inv = minetest.get_meta(pos):get_inventory()
	assert(inv:get_size("main") > 0, "no chest at " .. minetest.pos_to_string(pos))
	return inv
end

local function read_setting(name)
	assert(LEASABLE[name], name .. " is not a setting the bridge may lease")
	if name == "gravity" then return leases.gravity and leases.gravity.value or "1" end
	return conf:get(name) or ""
end

local function write_setting(name, value)
	if name == "gravity" then
		for _, player in ipairs(minetest.get_connected_players()) do
			player:set_physics_override({gravity = tonumber(value) or 1})
		end
	else
		conf:set(name, value)
	end
end

local commands = {}

function commands.say(p)
	minetest.chat_send_all(p.message)
	return {said = true}
end

function commands.spawn(p, key)
	local pos, ids = at(p), {}
	for i = 1, tonumber(p.count) or 1 do
		local id = key .. "#" .. i
		-- Reverted already (its revert came first): a revert is final for its key.
		if not retired[id] then
			local spot = {x = pos.x + (i - 1) * 2, y = pos.y, z = pos.z}
			assert(minetest.add_entity(spot, MOD .. ":" .. p.kind, id), "cannot add " .. p.kind)
			if not spots[id] then minetest.forceload_block(spot) end
			spots[id] = spot
			ids[#ids + 1] = id
		end
	end
	save("spots", spots)
	return {ids = ids}
end

function commands.despawn(p)
	-- Retired first: an entity in an unloaded block removes itself when it comes back.
	for _, id in ipairs(p.ids) do
		retired[id] = true
		release(id)
	end
	save("retired", retired)
	local removed = {}
	for _, entity in pairs(minetest.luaentities) do
		if entity.id and retired[entity.id] then
			entity.object:remove()
			removed[#removed + 1] = entity.id
		end
	end
	return {removed = removed}
end

-- The loaded entities; and, apart, those spawned and neither reverted nor killed whose block
-- is not active yet (just after a restart): the world cannot say they are gone.
function commands.entities()
	local found, loaded, waiting = present(), {}, {}
	for _, e in ipairs(found) do loaded[e.id] = true end
	for id, spot in pairs(spots) do
		if not loaded[id] and not minetest.compare_block_status(spot, "active") then
			waiting[#waiting + 1] = id
		end
	end
	return {entities = found, unloaded = waiting}
end

-- How many players are connected now (pageant's luanti.players_online reading).
function commands.players()
	return {count = #minetest.get_connected_players()}
end

function commands.give(p, key)
	if retired["give/" .. key] then return {given = 0} end -- taken back before it came
	local stack = ItemStack(p.item .. " " .. (tonumber(p.count) or 1))
	local left = chest(p, true):add_item("main", stack)
	return {given = stack:get_count() - left:get_count()}
end

function commands.take(p, key)
	retired["give/" .. key] = true
	save("retired", retired)
	local stack = ItemStack(p.item .. " " .. (tonumber(p.count) or 1))
	local given = done["give/" .. key] ~= nil
	local ok, inv = pcall(chest, p, false)
	if not ok then -- no chest there: never given, or gone with its chest
		return {taken = 0, gone = given and stack:get_count() or 0}
	end
	local taken = inv:remove_item("main", stack)
	return {taken = taken:get_count(), gone = stack:get_count() - taken:get_count()}
end

function commands.setting_get(p)
	return {value = read_setting(p.name)}
end

function commands.setting_set(p)
	local baseline = read_setting(p.name)
	if leases[p.name] then baseline = leases[p.name].baseline end
	leases[p.name] = {value = p.value, baseline = baseline, ["until"] = p["until"]}
	save("leases", leases)
	write_setting(p.name, p.value)
	return {baseline = baseline}
end

function commands.setting_restore(p)
	write_setting(p.name, p.baseline)
	leases[p.name] = nil
	save("leases", leases)
	return {value = p.baseline}
end

-- ── tests: real happenings made on the server side, for tests with no graphical client ──
-- Off unless pageant_bridge.test_commands is true. The test writes JSON lines
-- ({"id", "command", "payload"}) to WORLD/pageant_test.in; the mod takes the file, runs each
-- line and appends {"id", "answer"} lines to WORLD/pageant_test.out. A file, not a link
-- command: it reaches the game while pageant is down (the burst of digs during its restart).

local tests = {}

function tests.dig(p)
	local pos = at(p)
	minetest.set_node(pos, {name = p.node})
	return {dug = minetest.dig_node(pos)}
end

function tests.digs(p)
	local dug = 0
	for i = 1, p.count do
		if tests.dig({x = p.x + (i - 1) % 50, y = p.y, z = p.z + math.floor((i - 1) / 50), node = p.node}).dug then
			dug = dug + 1
		end
	end
	return {dug = dug}
end

function tests.kill(p)
	for _, entity in pairs(minetest.luaentities) do
		if entity.id == p.id then
			-- Damage, five at a time, until its on_death fires (bounded: never hang the server).
			for _ = 1, 100 do
				local hp = entity.object:get_hp()
				if hp <= 0 then break end
				entity.object:set_hp(math.max(0, hp - 5), {type = "set_hp"})
			end
			return {killed = dead[p.id] == true, hp = entity.object:get_hp()}
		end
	end
	return {killed = false}
end

function tests.chat(p)
	minetest.chat_send_all(p.message)
	-- What the server does with a player's line: each on_chat_message callback hears it.
	for _, callback in ipairs(minetest.registered_on_chat_messages) do
		if callback(p.player, p.message) then break end
	end
	return {said = true}
end

function tests.set(p)
	write_setting(p.name, p.value)
	return {value = read_setting(p.name)}
end

-- A connected player (a real client): how much gravity its physics has, and its hp set, as
-- damage would (hp 0 kills it, and the server runs its on_dieplayer callbacks).
local function connected(name)
	return assert(minetest.get_player_by_name(name or ""), "no player " .. tostring(name) .. " is connected")
end

function tests.players()
	local names = {}
	for _, player in ipairs(minetest.get_connected_players()) do names[#names + 1] = player:get_player_name() end
	return {players = names}
end

function tests.physics(p)
	return {gravity = connected(p.player):get_physics_override().gravity}
end

function tests.hurt(p)
	local player = connected(p.player)
	player:set_hp(tonumber(p.hp) or 0, {type = "set_hp"})
	return {hp = player:get_hp()}
end

-- What reverts retired (entity ids, and "give/KEY" for a gift), sorted.
function tests.retired()
	local ids = {}
	for id in pairs(retired) do ids[#ids + 1] = id end
	table.sort(ids)
	return {ids = ids}
end

tests.get = commands.setting_get
tests.entities = commands.entities
function tests.chest(p)
	local items = {}
	local inv = minetest.get_meta(at(p)):get_inventory()
	for _, stack in ipairs(inv:get_list("main") or {}) do
		if not stack:is_empty() then
			items[stack:get_name()] = (items[stack:get_name()] or 0) + stack:get_count()
		end
	end
	setmetatable(items, OBJECT) -- empty, still an object
	return {items = items}
end

local function serve_tests()
	local inbox = minetest.get_worldpath() .. "/pageant_test.in"
	local file = io.open(inbox, "r")
	if file then
		local text = file:read("*a")
		file:close()
		os.remove(inbox)
		local out = io.open(minetest.get_worldpath() .. "/pageant_test.out", "a")
		for line in text:gmatch("[^\n]+") do
			local c = minetest.parse_json(line)
			local ok, answer = pcall(tests[c.command], c.payload or {})
			out:write(encode({id = c.id, answer = ok and answer or nil, error = not ok and tostring(answer) or nil}) .. "\n")
		end
		out:close()
	end
	minetest.after(0.1, serve_tests)
end
if TESTS then minetest.after(0, serve_tests) end

-- "2027-03-01T12:00:10Z" (or with an offset, or fractional seconds) to Unix seconds.
local function epoch(text)
	local y, mo, d, h, mi, s, rest = tostring(text):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):([%d.]+)(.*)$")
	if not y then return nil end
	y, mo = tonumber(y), tonumber(mo)
	if mo <= 2 then y = y - 1 end
	local era = math.floor(y / 400)
	local yoe = y - era * 400
	local doy = math.floor((153 * (mo + (mo > 2 and -3 or 9)) + 2) / 5) + tonumber(d) - 1
	local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
	local t = days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + math.floor(tonumber(s))
	local sign, oh, om = rest:match("([+-])(%d+):(%d+)")
	if sign then t = t - (sign == "+" and 1 or -1) * (tonumber(oh) * 3600 + tonumber(om) * 60) end
	return t
end

local function run(c)
	local id = c.command .. "/" .. c.key
	local kept = done[id]
	if kept == nil then
		local deadline = c.deadline and epoch(c.deadline)
		local fn = commands[c.command]
		local result = {command = c.command, key = c.key}
		if deadline and os.time() > deadline then
			return -- withdrawn by now: the host will not act on any answer
		elseif not fn then
			result.error = "the bridge has no command " .. c.command
		else
			local ok, answer = pcall(fn, c.payload or {}, c.key)
			if ok then result.answer = answer else result.error = tostring(answer) end
		end
		kept = {r = result, t = os.time()}
		done[id] = kept
	end
	results[#results + 1] = kept.r
end

-- ── the lease's own clock: past until, put the value back if it is still ours ──

local function honour_until()
	local now, changed = os.time(), false
	for name, lease in pairs(leases) do
		local ends = epoch(lease["until"])
		if ends and now >= ends then
			if read_setting(name) == lease.value then write_setting(name, lease.baseline) end
			minetest.log("action", "[" .. MOD .. "] the lease on " .. name .. " ended; put back")
			leases[name] = nil
			changed = true
		end
	end
	if changed then save("leases", leases) end
	minetest.after(1, honour_until)
end

-- ── the sync ───────────────────────────────────────────────────────────────

local flushing = false

local function acknowledge(sent_results, sent_happenings)
	local acked = {}
	for _, h in ipairs(sent_happenings) do acked[h.id] = true end
	local left = {}
	for _, h in ipairs(outbox) do if not acked[h.id] then left[#left + 1] = h end end
	outbox = left
	local answered = {}
	for _, r in ipairs(sent_results) do answered[r.command .. "/" .. r.key] = true end
	left = {}
	for _, r in ipairs(results) do
		if not answered[r.command .. "/" .. r.key] then left[#left + 1] = r end
	end
	results = left
end

local function prune()
	local now = os.time()
	for id, kept in pairs(done) do if now - kept.t > KEEP then done[id] = nil end end
end

local function sync(wait, after)
	local sent_results = {}
	for i = 1, math.min(#results, BATCH) do sent_results[i] = results[i] end
	local sent_happenings = {}
	for i = 1, math.min(#outbox, BATCH) do sent_happenings[i] = outbox[i] end
	http.fetch({
		url = URL .. "/api/v1/link/" .. SERVER .. "/sync",
		method = "POST",
		timeout = wait + 10,
		extra_headers = {"Authorization: Bearer " .. TOKEN, "Content-Type: application/json"},
		data = encode({results = sent_results, happenings = sent_happenings, wait = wait}),
	}, function(res)
		local body = res.succeeded and res.code == 200 and minetest.parse_json(res.data)
		if body then
			acknowledge(sent_results, sent_happenings)
			for _, c in ipairs(body.commands or {}) do run(c) end
			prune()
			save("done", done)
		elseif res.code == 401 or res.code == 403 or res.code == 400 then
			minetest.log("error", "[" .. MOD .. "] the host refused the sync (" .. res.code .. "): " .. (res.data or ""))
		end
		save("results", results)
		save("outbox", outbox)
		after(body ~= nil)
	end)
end

-- The held sync: waits for commands; at once again after an answer, after a failure a pause.
local function hold()
	sync(WAIT, function(ok)
		minetest.after(ok and 0 or 2, hold)
		if ok and (#results > 0 or #outbox > 0) then sync_now() end
	end)
end

-- A quick sync (wait 0) carrying what happened and what was answered, beside the held one.
sync_now = function()
	if flushing or not http then return end
	flushing = true
	minetest.after(0.05, function()
		sync(0, function(ok)
			flushing = false
			if ok and (#results > 0 or #outbox > 0) then sync_now() end
		end)
	end)
end

if not (URL and SERVER and TOKEN) then
	minetest.log("error", "[" .. MOD .. "] set " .. MOD .. ".url, .server and .token in minetest.conf")
elseif not http then
	minetest.log("error", "[" .. MOD .. "] add secure.http_mods = " .. MOD .. " to minetest.conf")
else
	URL = URL:gsub("/+$", "")
	minetest.after(0, hold)
end
-- A restart forgets live settings: a lease still running is applied again (the restore finds
-- the value it set); one past its until is put back by the clock below.
for name, lease in pairs(leases) do
	if LEASABLE[name] then write_setting(name, lease.value) end
end
minetest.after(1, honour_until)
